/**
 * A job's schedule in a named zone, on every day the clocks change from 2026 to 2056, in zones
 * chosen for their awkward rules: every intended wall-clock occurrence is exactly one occurrence
 * (one instant, one run id), or (a gap's, under `dstGap: 'skip'`) one recorded skip, and no wall
 * time is two. The expected instants come from an oracle
 * of its own, written from `Intl` alone: a wall time that happens once is that instant, twice its
 * first, never (a gap) the first instant after the gap.
 */
import { describe, expect, it, vi } from 'vitest';
import { Schedule } from '../../../src/schedule/schedule';
import { TimeZone } from '../../../src/schedule/time-zone';
import { InvalidConfigError } from '../../../src/errors';

const ZONES = [
  'UTC',
  'Europe/London',
  'Europe/Dublin', // winter is its "negative" daylight time
  'Europe/Berlin',
  'Europe/Lisbon',
  'Europe/Moscow',
  'Europe/Istanbul',
  'Europe/Kyiv',
  'Atlantic/Azores', // changes at midnight
  'Africa/Casablanca', // goes back an hour for Ramadan, every year at a different date
  'Africa/Cairo',
  'Africa/Johannesburg',
  'Asia/Tehran',
  'Asia/Jerusalem',
  'Asia/Beirut', // changes at midnight
  'Asia/Amman',
  'Asia/Damascus',
  'Asia/Gaza',
  'Asia/Kolkata',
  'Asia/Kathmandu', // +05:45
  'Asia/Tokyo',
  'Australia/Sydney',
  'Australia/Adelaide', // +09:30/+10:30
  'Australia/Lord_Howe', // a 30-minute change
  'Australia/Eucla', // +08:45
  'Pacific/Auckland',
  'Pacific/Chatham', // +12:45/+13:45, changes at 02:45
  'Pacific/Norfolk',
  'Pacific/Easter', // changes at 22:00 local
  'Pacific/Apia',
  'America/New_York',
  'America/Chicago',
  'America/Denver',
  'America/Phoenix',
  'America/Los_Angeles',
  'America/Anchorage',
  'America/St_Johns', // -03:30/-02:30
  'America/Havana', // changes at midnight
  'America/Santiago', // changes at midnight, southern
  'America/Asuncion',
  'America/Sao_Paulo',
  'America/Nuuk', // changes at 22:00/23:00 local in some years
  'America/Scoresbysund',
  'America/Mexico_City',
  'Antarctica/Troll', // a two-hour change
  'Europe/Helsinki',
  'Europe/Chisinau',
  'Asia/Nicosia',
  'America/Halifax',
  'America/Miquelon',
  'Australia/Hobart',
];

/** Zones in the list for their offsets alone: none changes its clocks after 2025 (some did before). */
const FIXED = new Set([
  'UTC',
  'Europe/Moscow',
  'Europe/Istanbul',
  'Africa/Johannesburg',
  'Asia/Tehran',
  'Asia/Amman',
  'Asia/Damascus',
  'Asia/Kolkata',
  'Asia/Kathmandu',
  'Asia/Tokyo',
  'Australia/Eucla',
  'Pacific/Apia',
  'America/Phoenix',
  'America/Asuncion',
  'America/Sao_Paulo',
  'America/Mexico_City',
]);

/** Daily schedules at the wall times clocks change around, and one with several times in a gap. */
const SCHEDULES = [
  '0 0 0 * * *',
  '0 30 0 * * *',
  '0 0 1 * * *',
  '0 30 1 * * *',
  '0 0 2 * * *',
  '0 15 2 * * *',
  '0 30 2 * * *',
  '0 45 2 * * *',
  '0 0 3 * * *',
  '0 45 3 * * *',
  '0 0 22 * * *',
  '0 30 23 * * *',
  '59 59 23 * * *',
  '0 0,30 0-3 * * *',
];

const DAY = 86_400_000;
const FROM = Date.UTC(2026, 0, 1);
const TO = Date.UTC(2057, 0, 1);

/** The oracle's own reading of a zone: the wall clock at an instant, to the second. */
function wallClock(zone: string): (t: number) => number {
  const format = new Intl.DateTimeFormat('en-GB', {
    timeZone: zone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  return (t) => {
    const p = Object.fromEntries(format.formatToParts(t).map((x) => [x.type, Number(x.value)]));
    return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!);
  };
}

/** Instants at most a day after each change of the zone's offset: sampled weekly, then narrowed to the day. */
function changeDays(wall: (t: number) => number): number[] {
  const offsetAt = (t: number) => wall(t) - t;
  const days: number[] = [];
  let offset = offsetAt(FROM);
  for (let t = FROM; t < TO; t += 7 * DAY) {
    const now = offsetAt(t);
    if (now === offset) continue;
    // No zone changes twice within a week: the change is in (t - 7 days, t].
    let lo = t - 7 * DAY;
    let hi = t;
    while (hi - lo > DAY) {
      const mid = lo + Math.floor((hi - lo) / (2 * DAY)) * DAY;
      if (offsetAt(mid) === offset) lo = mid;
      else hi = mid;
    }
    days.push(hi);
    offset = now;
  }
  return days;
}

/**
 * Where the oracle puts a wall time: among instants up to 3 h either side of its reading at the
 * offsets around, those whose wall clock reads it, the first; if none, the first second whose
 * wall clock reads later than it (the end of the gap).
 */
function oracleInstant(wall: (t: number) => number, wallMs: number, offsets: number[]): number {
  const exact = offsets
    .map((o) => wallMs - o)
    .filter((t) => wall(t) === wallMs)
    .sort((a, b) => a - b);
  if (exact.length > 0) return exact[0]!;
  let lo = wallMs - Math.max(...offsets) - 3_600_000;
  let hi = wallMs - Math.min(...offsets) + 3_600_000;
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (wall(mid) > wallMs) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** The wall times a daily-style expression names on the wall dates of [fromMs, toMs). */
function intendedWalls(expression: string, fromWall: number, toWall: number): number[] {
  const [second, minute, hour] = expression.split(' ');
  const list = (field: string) =>
    field.includes('-')
      ? (() => {
          const [a, b] = field.split('-').map(Number);
          return Array.from({ length: b! - a! + 1 }, (_, i) => a! + i);
        })()
      : field.split(',').map(Number);
  const walls: number[] = [];
  for (let day = Math.floor(fromWall / DAY) * DAY; day <= toWall; day += DAY) {
    for (const h of list(hour!))
      for (const m of list(minute!))
        for (const s of list(second!)) {
          const w = day + h * 3_600_000 + m * 60_000 + s * 1000;
          if (w > fromWall && w <= toWall) walls.push(w);
        }
  }
  return walls;
}

describe('schedules in a named time zone, 2026 to 2056', () => {
  it.each(ZONES)('%s: each wall time on a day the clocks change is one occurrence, and none is two', (zoneName) => {
    const zone = TimeZone.of(zoneName);
    const wall = wallClock(zoneName);
    const days = changeDays(wall);
    // A zone chosen for its changes has them (or the oracle found none and proves nothing).
    expect(days.length > 0, `${zoneName} changes its clocks`).toBe(!FIXED.has(zoneName));
    // Each change with one of the schedules, in turn: every schedule meets every kind of change
    // the zone has, several times over the thirty years, at a cost CI can pay.
    const offset = ZONES.indexOf(zoneName);
    days.forEach((changeAt, i) => {
      const expression = SCHEDULES[(i + offset) % SCHEDULES.length]!;
      const schedule = Schedule.parse(expression, 'schedule', zone);
      {
        // The change is within the day before: two days either side of it, as instants and as
        // the wall clock reads them.
        const from = changeAt - 3 * DAY;
        const to = changeAt + 2 * DAY;
        const offsets = [...new Set([wall(from) - from, wall(to) - to, wall(changeAt) - changeAt])];
        const walls = intendedWalls(expression, wall(from), wall(to));
        const expected = [...new Set(walls.map((w) => oracleInstant(wall, w, offsets)))]
          .filter((t) => t > from && t <= to)
          .sort((a, b) => a - b);
        // An occurrence whose own wall time the expression does not name stands only for wall
        // times in a gap: under `dstGap: 'skip'` it is recorded as skipped, not run.
        const named = new Set(walls);
        const inGap = expected.filter((t) => !named.has(wall(t)));
        const actual: number[] = [];
        for (let t = schedule.next(new Date(from)); t && t.getTime() <= to; t = schedule.next(t)) actual.push(t.getTime());
        expect(
          actual.map((t) => new Date(t).toISOString()),
          `${expression} around ${new Date(changeAt).toISOString()}`,
        ).toEqual(expected.map((t) => new Date(t).toISOString()));
        // Counted without stepping (the path a long outage takes), and listed newest first, the same.
        expect(
          actual.filter((t) => schedule.inGap(new Date(t))).map((t) => new Date(t).toISOString()),
          `${expression} around ${new Date(changeAt).toISOString()}: the occurrences only a gap's wall times make`,
        ).toEqual(inGap.map((t) => new Date(t).toISOString()));
        const listed = schedule.occurrencesBetween(new Date(from), new Date(to), 1000);
        expect(listed.total).toBe(expected.length);
        expect(listed.occurrences.map((d) => d.getTime())).toEqual(expected);
      }
    });
  });

  it.each(ZONES)('%s: a daily schedule occurs once a day, counted over a whole year', (zoneName) => {
    const zone = TimeZone.of(zoneName);
    const wall = wallClock(zoneName);
    for (const [k, year] of [2026, 2041, 2056].entries()) {
      const expression = k % 2 === 0 ? '0 30 2 * * *' : '0 0 0 * * *';
      const schedule = Schedule.parse(expression, 'schedule', zone);
      {
        // From a wall-clock noon to the next year's: the count is the year's days exactly.
        const start = Date.UTC(year, 0, 1, 12) - (wall(Date.UTC(year, 0, 1, 12)) - Date.UTC(year, 0, 1, 12));
        const end = Date.UTC(year + 1, 0, 1, 12) - (wall(Date.UTC(year + 1, 0, 1, 12)) - Date.UTC(year + 1, 0, 1, 12));
        const days = (Date.UTC(year + 1, 0, 1) - Date.UTC(year, 0, 1)) / DAY;
        expect(schedule.occurrencesBetween(new Date(start), new Date(end), 0).total, `${expression} in ${year}`).toBe(days);
      }
    }
  });
});

describe('what a schedule in a zone does across the changes (Europe/Berlin, 2026)', () => {
  const berlin = TimeZone.of('Europe/Berlin');
  const run = (expression: string, from: string, count: number) => {
    const schedule = Schedule.parse(expression, 'schedule', berlin);
    const out: string[] = [];
    for (let t = schedule.next(new Date(from)); t && out.length < count; t = schedule.next(t)) out.push(t.toISOString());
    return out;
  };

  it('every 30 minutes: the skipped hour is one occurrence at 03:00, the repeated hour runs once', () => {
    // 29 March: 02:00 CET becomes 03:00 CEST. 02:00 and 02:30 do not happen; they run at 03:00.
    expect(run('0 */30 * * * *', '2026-03-28T23:45:00Z', 4)).toEqual([
      '2026-03-29T00:00:00.000Z', // 01:00 CET
      '2026-03-29T00:30:00.000Z', // 01:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST (and 02:00, 02:30)
      '2026-03-29T01:30:00.000Z', // 03:30 CEST
    ]);
    // 25 October: 03:00 CEST becomes 02:00 CET. 02:00 and 02:30 run in their first pass only.
    expect(run('0 */30 * * * *', '2026-10-24T23:45:00Z', 4)).toEqual([
      '2026-10-25T00:00:00.000Z', // 02:00 CEST
      '2026-10-25T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T02:00:00.000Z', // 03:00 CET, an hour later
      '2026-10-25T02:30:00.000Z',
    ]);
  });

  it('daily at 02:30: at 03:00 on the day it is skipped, once on the day it repeats', () => {
    expect(run('0 30 2 * * *', '2026-03-28T00:00:00Z', 3)).toEqual([
      '2026-03-28T01:30:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
    expect(run('0 30 2 * * *', '2026-10-24T00:00:00Z', 3)).toEqual([
      '2026-10-24T00:30:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
    ]);
  });

  it('a UTC schedule never wakes Intl’s zone data, which costs a cold start milliseconds', () => {
    const made = vi.spyOn(Intl, 'DateTimeFormat');
    try {
      for (const name of ['UTC', 'utc', 'Etc/UTC']) {
        const zone = TimeZone.of(name);
        expect(zone.name).toBe('UTC');
        expect(zone.offsetMs(Date.UTC(2026, 6, 1))).toBe(0);
        // Parsed at start-up (defineJob); stepping through it is croner's, on the first check.
        expect(Schedule.parse('0 30 2 * * *', 'schedule', zone).timeZone).toBe('UTC');
      }
      expect(made).not.toHaveBeenCalled();
    } finally {
      made.mockRestore();
    }
  });

  it('a zone the runtime does not know fails with one line naming the option', () => {
    expect(() => TimeZone.of('Europe/Atlantis', 'nightly.timeZone')).toThrow(InvalidConfigError);
    expect(() => TimeZone.of('Europe/Atlantis', 'nightly.timeZone')).toThrow(
      /^nightly\.timeZone "Europe\/Atlantis" is not a time zone/,
    );
  });
});
