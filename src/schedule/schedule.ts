import { Cron, CronPattern } from 'croner';
import { InvalidConfigError, messageOf } from '../errors';
import { TimeZone } from './time-zone';

/**
 * Job schedules use the NCRONTAB dialect of Azure Functions timer triggers, so an expression
 * that works in function.json works here and means the same thing: day-of-month AND day-of-week
 * (NCrontab requires both, unlike Vixie cron's OR), Sunday = 0 only. croner does the date
 * arithmetic; we check the grammar first because croner accepts more (`@daily`, a year field,
 * `L`, `W`, `#`, `?`, Sunday = 7) than Azure would.
 *
 * A schedule is read in UTC, or in a named zone's wall clock. In a zone, croner steps through the
 * wall times the expression names as if they were UTC, and each becomes an instant here, by the
 * rules croner leaves to chance on the days the clocks change (it drops the day of `15,45 2`
 * when 02:00 to 03:00 is skipped): a wall time that happens once is that instant; one that
 * happens twice (the clocks go back over it) is its first instant only; one that never happens
 * (the clocks skip it) is the first instant after the gap, and every wall time in one gap is
 * that same instant. So every wall time is one occurrence, and no two instants share one.
 */

const FIELDS = [
  { name: 'second', min: 0, max: 59 },
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: 'JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC' },
  { name: 'day-of-week', min: 0, max: 6, names: 'SUN MON TUE WED THU FRI SAT' },
] as const;

// `*`, `v`, `v-v`, each optionally `/step`; a value is a number or (month, day of week) a name.
const ELEMENT = /^(?:\*|([0-9]+|[A-Za-z]{3})(?:-([0-9]+|[A-Za-z]{3}))?)(?:\/([0-9]+))?$/;

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;

/** How near an offset change a zone's occurrences are stepped through rather than counted: past the largest change (2 h). */
const HOT_MS = 3 * HOUR_MS;
/** Wall times one search may pass over: a repeated hour of an every-second schedule is 3,600. */
const MAX_WALL_STEPS = 20_000;
/** Wall times read back at once when listing a zone's newest occurrences. */
const WALL_BATCH = 256;

/** Most occurrences `planOccurrences` lists, so a long outage cannot stall the timer. */
const MAX_ENUMERATED = 1000;

/** Answers of `next()` one schedule keeps: one per job that shares it, and a few more. */
const NEXT_KEPT = 1024;

/** Schedules parsed so far, by expression: the app's jobs' and the coordinator's, and a few more. */
const PARSED = new Map<string, Schedule>();
const PARSED_KEPT = 256;

export class Schedule {
  /** croner's runner, built when first asked for an instant (`cron`). */
  private runner: Cron | undefined;
  /** The six fields, as croner reads them. */
  private readonly fields: string;
  private readonly pattern: CronPattern;
  /** Occurrences in one matching day, hour and minute, for counting without enumerating. */
  private readonly perUnit: ReadonlyArray<{ ms: number; count: number }>;
  /** `next()`'s answers, by the instant asked about (ms), oldest first. */
  private readonly nextAfter = new Map<number, number | undefined>();
  /** `shortestGapMs()`'s last answer, and the hour it was asked from. */
  private shortestGap: { hour: number; count: number; ms: number | undefined } | undefined;
  /** `fixedPeriod()`, once asked (null: not yet). */
  private grid: { periodMs: number; offsetMs: number } | undefined | null = null;

  private constructor(
    readonly expression: string,
    fields: string[],
    /** The zone whose wall clock the expression reads; undefined for UTC. */
    private readonly zone: TimeZone | undefined,
  ) {
    const pattern = fields.join(' ');
    this.fields = pattern;
    const parsed = new CronPattern(pattern, 'UTC', { mode: '6-part', sloppyRanges: true });
    this.pattern = parsed;
    const seconds = parsed.second.filter(Boolean).length;
    const minutes = parsed.minute.filter(Boolean).length;
    const hours = parsed.hour.filter(Boolean).length;
    this.perUnit = [
      { ms: DAY_MS, count: seconds * minutes * hours },
      { ms: HOUR_MS, count: seconds * minutes },
      { ms: MINUTE_MS, count: seconds },
    ];
  }

  /**
   * Built when first asked for an instant: an app's start parses each schedule to check it, and
   * croner's runner parses the pattern again (about a millisecond the first time).
   */
  private get cron(): Cron {
    // sloppyRanges: NCrontab reads `5/10` as `5-max/10`, and so does croner with it.
    this.runner ??= new Cron(this.fields, { timezone: 'UTC', paused: true, domAndDow: true, mode: '6-part', sloppyRanges: true });
    return this.runner;
  }

  /**
   * 6 fields (NCRONTAB), or 5 (classic cron, run at second 0). A schedule is immutable, so one
   * parsed before is handed out again: an instance's start reads its coordinator schedule five
   * times, and each parse builds croner's pattern twice.
   */
  static parse(expression: string, option = 'schedule', timeZone?: TimeZone): Schedule {
    const zone = timeZone && !timeZone.isUtc ? timeZone : undefined;
    const key = zone ? `${zone.name}\n${expression}` : expression;
    const known = typeof expression === 'string' ? PARSED.get(key) : undefined;
    if (known) return known;
    const schedule = Schedule.parseNew(expression, option, zone);
    if (PARSED.size >= PARSED_KEPT) PARSED.delete(PARSED.keys().next().value as string);
    PARSED.set(key, schedule);
    return schedule;
  }

  /** The zone's name: `UTC` unless the schedule reads a zone's wall clock. */
  get timeZone(): string {
    return this.zone?.name ?? 'UTC';
  }

  private static parseNew(expression: string, option: string, zone: TimeZone | undefined): Schedule {
    const fail = (reason: string): never => {
      // JSON.stringify quotes the expression and keeps the message on one line.
      throw new InvalidConfigError(
        option,
        `${option} ${JSON.stringify(expression)} is not a valid NCRONTAB expression: ${reason}`,
      );
    };
    if (typeof expression !== 'string') return fail('it must be a string');
    const fields = expression
      .trim()
      .split(/\s+/)
      .filter((f) => f !== '');
    if (fields[0]?.startsWith('@')) return fail('@ shortcuts are not supported, write the fields');
    if (fields.length === 5) fields.unshift('0');
    if (fields.length !== 6) {
      return fail(`expected 6 fields (second minute hour day month day-of-week) or 5, got ${fields.length}`);
    }
    fields.forEach((field, i) => {
      const spec = FIELDS[i]!;
      for (const element of field.split(',')) {
        const m = ELEMENT.exec(element);
        if (!m) return fail(`${spec.name} field "${field}" has an unsupported element "${element}"`);
        for (const value of [m[1], m[2]]) {
          if (value === undefined) continue;
          if (/^[0-9]+$/.test(value)) {
            const n = Number(value);
            if (n < spec.min || n > spec.max) {
              return fail(`${spec.name} value ${value} is out of range ${spec.min}-${spec.max}`);
            }
          } else if (!('names' in spec) || !spec.names.split(' ').includes(value.toUpperCase())) {
            return fail(`${spec.name} field "${field}" has an unknown name "${value}"`);
          }
        }
        if (m[3] !== undefined && Number(m[3]) < 1) return fail(`${spec.name} step must be at least 1`);
      }
    });
    try {
      return new Schedule(expression, fields, zone);
    } catch (err) {
      // Whatever the grammar check let through and croner refuses (e.g. a range 5-2).
      return fail(messageOf(err).replace(/^CronPattern:\s*/, ''));
    }
  }

  /**
   * When the schedule fires at a fixed period that divides a day (every 2 s, every 5 minutes),
   * that period and its offset: occurrences are the instants t with t mod periodMs = offsetMs.
   * Undefined for irregular schedules.
   *
   * Read off the parsed fields rather than by stepping through a day's occurrences: croner takes
   * hundreds of microseconds a step on a slow machine, and every instance asks at start-up for
   * its every-second coordinator schedule, which cost it seconds of CPU.
   */
  fixedPeriod(): { periodMs: number; offsetMs: number } | undefined {
    // A zone's grid moves with its offset: none is fixed in UTC.
    if (this.zone) return undefined;
    if (this.grid === null) this.grid = this.findPeriod();
    return this.grid;
  }

  private findPeriod(): { periodMs: number; offsetMs: number } | undefined {
    const { second, minute, hour, day, month, dayOfWeek } = this.pattern;
    // A period that divides a day fires on every day; one that skips a day has none.
    if (![day, month, dayOfWeek].every((field) => field.every(Boolean))) return undefined;
    // Even steps in each field, and a field stepping within its unit only under a coarser field
    // that fires every time: read from the fields, since walking a day's 86,400 seconds costs an
    // app's start about 2 ms.
    const s = evenSteps(second);
    const m = evenSteps(minute);
    const h = evenSteps(hour);
    if (!s || !m || !h) return undefined;
    let period: number;
    if (s.step < 60) {
      if (m.step !== 1 || h.step !== 1) return undefined;
      period = s.step;
    } else if (m.step < 60) {
      if (h.step !== 1) return undefined;
      period = m.step * 60;
    } else {
      period = h.step * 3600;
    }
    return { periodMs: period * 1000, offsetMs: (h.first * 3600 + m.first * 60 + s.first) * 1000 };
  }

  /**
   * The shortest time between two consecutive occurrences among the `count` after `from`, or
   * undefined with fewer than two: what a job's jitter must stay under. A fixed period is its own
   * answer; otherwise the answer is kept for the hour, since every job of an app with hundreds on
   * one schedule asks at start-up, and stepping 400 occurrences takes croner milliseconds.
   */
  shortestGapMs(from: Date, count = 400): number | undefined {
    const grid = this.fixedPeriod();
    if (grid) return grid.periodMs;
    const hour = Math.floor(from.getTime() / HOUR_MS);
    if (this.shortestGap?.hour === hour && this.shortestGap.count === count) return this.shortestGap.ms;
    const ms = this.steppedShortestGapMs(from, count);
    this.shortestGap = { hour, count, ms };
    return ms;
  }

  private steppedShortestGapMs(from: Date, count: number): number | undefined {
    // Straight from the expression, past next()'s memory, which is for the instants checks ask about.
    const step = (after: Date): Date | undefined => {
      const at = this.nextMs(after.getTime());
      return at === undefined ? undefined : new Date(at);
    };
    let shortest: number | undefined;
    let previous = step(from);
    for (let i = 1; i < count && previous; i++) {
      const next = step(previous);
      if (!next) break;
      const gap = next.getTime() - previous.getTime();
      if (shortest === undefined || gap < shortest) shortest = gap;
      previous = next;
    }
    return shortest;
  }

  /**
   * The first occurrence strictly after `after`, or undefined if there is none (e.g. `0 0 0 30 2 *`).
   * Remembered for the last few instants asked about: a leader asks after each job's last check on
   * every turn, and a job's last check stays put between its occurrences (croner takes tens of
   * microseconds a step, and hundreds of jobs are checked several times a second).
   */
  next(after: Date): Date | undefined {
    const key = after.getTime();
    if (this.nextAfter.has(key)) {
      const known = this.nextAfter.get(key);
      return known === undefined ? undefined : new Date(known);
    }
    const at = this.nextMs(key);
    if (this.nextAfter.size >= NEXT_KEPT) this.nextAfter.delete(this.nextAfter.keys().next().value as number);
    this.nextAfter.set(key, at);
    return at === undefined ? undefined : new Date(at);
  }

  /** `next()` worked out afresh, in ms. */
  private nextMs(afterMs: number): number | undefined {
    return this.zone ? this.zonedNext(afterMs) : this.wallNext(new Date(afterMs))?.getTime();
  }

  /**
   * Whether an occurrence stands only for wall times the clocks skipped: it is the first instant
   * after a gap, and the expression does not name that instant's own wall time. Never for UTC.
   */
  inGap(occurrence: Date): boolean {
    if (!this.zone) return false;
    const wall = occurrence.getTime() + this.zone.offsetMs(occurrence.getTime());
    return this.wallNext(new Date(wall - 1))?.getTime() !== wall;
  }

  /** The next wall time the expression names, read as UTC (for a UTC schedule, the occurrence). */
  private wallNext(after: Date): Date | undefined {
    return this.cron.nextRun(after) ?? undefined;
  }

  /** The instant of a wall time, by the rules in the header. */
  private instantOfWall(zone: TimeZone, wallMs: number): number {
    const { instants, afterGap } = zone.instantsOf(wallMs);
    return instants[0] ?? (afterGap as number);
  }

  /**
   * Wall times map to instants in the same order (a gap's to one instant, a repeated hour's to
   * its first pass), so the next occurrence is the first wall time from `after`'s own whose
   * instant is later than `after`. Only in a repeated hour are wall times passed over: those of
   * its first pass, when `after` is in its second.
   */
  private zonedNext(afterMs: number): number | undefined {
    const zone = this.zone as TimeZone;
    const wallAfter = afterMs + zone.offsetMs(afterMs);
    let wall = this.wallNext(new Date(wallAfter - 1));
    for (let steps = 0; wall !== undefined; steps++) {
      const at = this.instantOfWall(zone, wall.getTime());
      if (at > afterMs) return at;
      if (steps > MAX_WALL_STEPS)
        throw new Error(
          `schedule ${this.expression} in ${zone.name}: no occurrence found after ${new Date(afterMs).toISOString()}`,
        );
      wall = this.wallNext(wall);
    }
    return undefined;
  }

  /**
   * Occurrences in (afterExclusive, untilInclusive], ascending. When there are more than `limit`,
   * the newest `limit` are kept, because a scheduler cares most about the latest; `total` is
   * the full count either way.
   */
  occurrencesBetween(
    afterExclusive: Date,
    untilInclusive: Date,
    limit: number,
  ): { occurrences: Date[]; truncated: boolean; total: number } {
    const total = this.count(afterExclusive, untilInclusive);
    const take = Math.max(0, Math.min(total, Math.floor(limit)));
    if (take === 0) return { occurrences: [], truncated: total > 0, total };
    const occurrences = this.zone
      ? this.zonedNewest(this.zone, afterExclusive.getTime(), untilInclusive.getTime(), take)
      : // Occurrences are whole seconds, so "before until + 1 ms" means "at or before until".
        this.cron.previousRuns(take, new Date(untilInclusive.getTime() + 1)).reverse();
    return { occurrences, truncated: take < total, total };
  }

  /**
   * The newest `take` occurrences in (after, until], ascending: wall times walked back from the
   * last that can land at or before `until` (past `until`'s own by what the clocks went back
   * within the day, when they did).
   */
  private zonedNewest(zone: TimeZone, afterMs: number, untilMs: number, take: number): Date[] {
    const back = Math.max(0, zone.offsetMs(untilMs - DAY_MS) - zone.offsetMs(untilMs));
    let cursor = new Date(untilMs + zone.offsetMs(untilMs) + back + 1);
    const found: number[] = [];
    while (found.length < take) {
      const walls = this.cron.previousRuns(Math.min(WALL_BATCH, Math.max(take, 16)), cursor);
      if (walls.length === 0) break;
      for (const wall of walls) {
        const at = this.instantOfWall(zone, wall.getTime());
        if (at <= afterMs) return found.reverse().map((t) => new Date(t));
        if (at <= untilMs && at !== found.at(-1)) found.push(at);
        if (found.length === take) break;
      }
      cursor = walls.at(-1) as Date;
    }
    return found.reverse().map((t) => new Date(t));
  }

  /**
   * How many occurrences fall in (after, until]. croner takes tens of microseconds per
   * occurrence, so counting an every-second schedule across a day-long outage one by one would
   * take seconds. Because UTC has no DST, every matching day (hour, minute) holds the same number
   * of occurrences, so whole units inside the window are counted at once and only the ragged
   * edges are stepped through: at most a few hundred steps plus one per matching day.
   */
  private count(after: Date, until: Date): number {
    if (this.zone) return this.zonedCount(this.zone, after.getTime(), until.getTime());
    return this.wallCount(after, until);
  }

  /**
   * In a zone: away from its offset changes an occurrence is its wall time less one offset, so
   * those stretches are counted as wall times; within `HOT_MS` of a change, where the rules in
   * the header apply, occurrences are stepped through one by one.
   */
  private zonedCount(zone: TimeZone, afterMs: number, untilMs: number): number {
    if (untilMs <= afterMs) return 0;
    let total = 0;
    let cursor = afterMs;
    const cold = (from: number, to: number): number => {
      const offset = zone.offsetMs(to);
      return this.wallCount(new Date(from + offset), new Date(to + offset));
    };
    for (const change of zone.transitionsBetween(afterMs - HOT_MS, untilMs + HOT_MS)) {
      const hotFrom = Math.max(cursor, change - HOT_MS);
      const hotTo = Math.min(untilMs, change + HOT_MS);
      if (hotTo <= hotFrom) continue;
      if (hotFrom > cursor) total += cold(cursor, hotFrom);
      for (let at = this.zonedNext(hotFrom); at !== undefined && at <= hotTo; at = this.zonedNext(at)) total++;
      cursor = hotTo;
    }
    if (untilMs > cursor) total += cold(cursor, untilMs);
    return total;
  }

  /** Wall times in (after, until], read as UTC: for a UTC schedule, its occurrences. */
  private wallCount(after: Date, until: Date): number {
    const afterMs = after.getTime();
    const untilMs = until.getTime();
    let total = 0;
    let t = this.wallNext(after);
    while (t !== undefined && t.getTime() <= untilMs) {
      const at = t.getTime();
      const whole = this.perUnit
        .map((u) => ({ ...u, start: at - (at % u.ms) }))
        .find((u) => u.start > afterMs && u.start + u.ms - 1000 <= untilMs);
      if (whole) {
        total += whole.count;
        t = this.wallNext(new Date(whole.start + whole.ms - 1000));
      } else {
        total += 1;
        t = this.wallNext(t);
      }
    }
    return total;
  }
}

export interface OccurrencePlan {
  /** Occurrences to start now, ascending. */
  run: Date[];
  /** Occurrences not run (too old, or superseded under 'latest'), ascending; may be truncated. */
  missed: Date[];
  /** Listed occurrences the job skips by its rule (`skip`), ascending; not counted as missed. */
  skipped: Date[];
  /** True when there were more occurrences than could be listed; `missedCount` still counts them. */
  missedTruncated: boolean;
  /** Every occurrence in the window that is not in `run`, listed or not. */
  missedCount: number;
  /** Store this as the next `lastChecked`. */
  checkedUntil: Date;
}

export function planOccurrences(input: {
  schedule: Schedule;
  lastChecked: Date | undefined;
  now: Date;
  startingDeadlineSeconds: number;
  catchUp: 'latest' | 'all';
  /** The only first-check policy: a new job does not fire for its history. */
  firstCheck?: 'now';
  /**
   * With jitter: when an occurrence is due to start (its instant plus its jitter, in ms), and the
   * most any jitter adds, which is shorter than the schedule's shortest gap.
   */
  jitter?: { startOf: (occurrence: Date) => number; maxMs: number };
  /**
   * Occurrences the job does not run by its own rule (a wall time the clocks skipped, under
   * `dstGap: 'skip'`): set aside before catch-up picks, so one never supersedes another.
   */
  skip?: (occurrence: Date) => boolean;
}): OccurrencePlan {
  const { schedule, lastChecked, now, startingDeadlineSeconds, catchUp, jitter, skip } = input;
  const empty = (checkedUntil: Date): OccurrencePlan => ({
    run: [],
    missed: [],
    skipped: [],
    missedTruncated: false,
    missedCount: 0,
    checkedUntil,
  });
  if (lastChecked === undefined) return empty(now);
  // If a clock went backwards (another instance took over), never move the mark back: that
  // would reconsider, and run again, occurrences that were already handled.
  if (lastChecked.getTime() >= now.getTime()) return empty(lastChecked);

  // An occurrence whose jittered start is still ahead waits for a later check: the window ends
  // just before it. Jitter is shorter than any gap, so at most one occurrence can be waiting.
  let until = now;
  const startOf = (o: Date): number => (jitter ? jitter.startOf(o) : o.getTime());
  // Most checks find nothing due: the first occurrence after the last check (which `next`
  // remembers, as the check stays put between occurrences) is still ahead, or still waiting for
  // its jittered start. Nothing to count or list then.
  const first = schedule.next(lastChecked);
  if (first === undefined || first.getTime() > now.getTime()) return empty(now);
  if (startOf(first) > now.getTime()) return empty(new Date(first.getTime() - 1));
  if (jitter && jitter.maxMs > 0) {
    const from = new Date(Math.max(lastChecked.getTime(), now.getTime() - jitter.maxMs));
    const waiting = schedule.occurrencesBetween(from, now, 2).occurrences.find((o) => startOf(o) > now.getTime());
    if (waiting) until = new Date(waiting.getTime() - 1);
    if (until.getTime() <= lastChecked.getTime()) return empty(lastChecked);
  }

  const { occurrences, truncated, total } = schedule.occurrencesBetween(lastChecked, until, MAX_ENUMERATED);
  const deadlineMs = startingDeadlineSeconds * 1000;
  const isDue = (o: Date): boolean => now.getTime() - startOf(o) <= deadlineMs;
  const skipped = skip ? occurrences.filter(skip) : [];
  const kept = skip ? occurrences.filter((o) => !skipped.includes(o)) : occurrences;
  const due = kept.filter(isDue);
  const missed = kept.filter((o) => !isDue(o));
  // 'latest': one run stands for the whole backlog; the older due ones are superseded.
  const run = catchUp === 'all' ? due : due.slice(-1);
  // Every too-old occurrence precedes every due one, so appending keeps `missed` ascending.
  if (catchUp !== 'all') missed.push(...due.slice(0, -1));
  return {
    run,
    missed,
    skipped,
    missedTruncated: truncated,
    missedCount: total - run.length - skipped.length,
    checkedUntil: until,
  };
}

export type OverlapPolicy = 'skip' | 'allow' | 'replace';

/** Whether a new run may start while `activeRunIds` are still running, and which to cancel. */
export function decideOverlap(
  policy: OverlapPolicy,
  activeRunIds: string[],
): { start: boolean; cancel: string[]; skippedBecause?: string } {
  switch (policy) {
    case 'skip':
      if (activeRunIds.length === 0) return { start: true, cancel: [] };
      return {
        start: false,
        cancel: [],
        skippedBecause:
          activeRunIds.length === 1
            ? `run ${activeRunIds[0]} is still active`
            : `runs ${activeRunIds.join(', ')} are still active`,
      };
    case 'allow':
      return { start: true, cancel: [] };
    case 'replace':
      return { start: true, cancel: [...activeRunIds] };
    default: {
      // Config may come from untyped JSON; fail loudly rather than guess a policy.
      const unknown: never = policy;
      throw new InvalidConfigError('overlap', `overlap "${String(unknown)}" must be one of skip, allow, replace`);
    }
  }
}

/**
 * A field's set values as even steps around its unit: `first`, `first + step`, … and back to
 * `first` (one value is a step of the whole unit); undefined when they are not.
 */
function evenSteps(field: readonly number[]): { first: number; step: number } | undefined {
  const set: number[] = [];
  field.forEach((on, value) => {
    if (on) set.push(value);
  });
  if (set.length === 0 || field.length % set.length !== 0) return undefined;
  const step = field.length / set.length;
  if (set[0]! >= step) return undefined;
  for (let i = 1; i < set.length; i++) if (set[i]! - set[i - 1]! !== step) return undefined;
  return { first: set[0]!, step };
}
