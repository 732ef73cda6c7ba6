import { InvalidConfigError } from '../errors';

/**
 * A named IANA time zone's offsets from UTC, read from the runtime's own tz database (`Intl`), so
 * Baton never ships or updates zone rules of its own: Node's ICU is what the platform keeps
 * current.
 */
export class TimeZone {
  private static readonly known = new Map<string, TimeZone>();
  private static utc: TimeZone | undefined;
  /** Made on first use: UTC never needs it. */
  private partsFormat: Intl.DateTimeFormat | undefined;
  private readonly years = new Map<number, ZoneYear>();

  private constructor(readonly name: string) {}

  private get parts(): Intl.DateTimeFormat {
    return (this.partsFormat ??= new Intl.DateTimeFormat('en-US', {
      timeZone: this.name,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    }));
  }

  /** The zone, or an error naming `option` for a name the runtime does not know. */
  static of(name: string, option = 'timeZone'): TimeZone {
    const known = TimeZone.known.get(name);
    if (known) return known;
    // Every job's default: no need to wake ICU's zone data (milliseconds of a cold start) for it.
    if (typeof name === 'string' && /^(?:Etc\/)?UTC$/i.test(name)) {
      const utc = (TimeZone.utc ??= new TimeZone('UTC'));
      TimeZone.known.set(name, utc);
      return utc;
    }
    let canonical: string;
    try {
      if (typeof name !== 'string' || name.trim() === '') throw new RangeError('empty');
      canonical = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
    } catch {
      throw new InvalidConfigError(
        option,
        `${option} ${JSON.stringify(name)} is not a time zone this runtime knows: use an IANA name such as "Europe/Berlin", "America/New_York" or "UTC"`,
      );
    }
    const zone = new TimeZone(canonical);
    TimeZone.known.set(name, zone);
    return zone;
  }

  get isUtc(): boolean {
    return this.name === 'UTC' || this.name === 'Etc/UTC';
  }

  /** The zone's offset at `instantMs`: wall clock minus UTC, in ms. */
  offsetMs(instantMs: number): number {
    if (this.isUtc) return 0;
    const year = this.yearOf(new Date(instantMs).getUTCFullYear());
    let offset = year.startOffset;
    // Few changes a year: the last one at or before the instant rules.
    for (const change of year.changes) {
      if (change.at > instantMs) break;
      offset = change.offset;
    }
    return offset;
  }

  /** The offset as `Intl` reads it, at a whole second. */
  private readOffset(instantMs: number): number {
    const at = Math.floor(instantMs / 1000) * 1000;
    const f: Record<string, number> = {};
    for (const p of this.parts.formatToParts(at)) if (p.type !== 'literal') f[p.type] = Number(p.value);
    const wall = Date.UTC(f.year!, f.month! - 1, f.day!, f.hour!, f.minute!, f.second!);
    return wall - at;
  }

  /**
   * A UTC year's offset at its start and its changes, each the first second of a new offset:
   * read once, by sampling every `SCAN_MS` and narrowing each change down to the second, so that
   * every later question is a lookup (`Intl` takes microseconds a reading).
   */
  private yearOf(year: number): ZoneYear {
    let known = this.years.get(year);
    if (known) return known;
    const start = Date.UTC(year, 0, 1);
    const end = Date.UTC(year + 1, 0, 1);
    const startOffset = this.readOffset(start);
    const changes: ZoneYear['changes'] = [];
    let offset = startOffset;
    for (let at = start; at < end; at += SCAN_MS) {
      const next = Math.min(end, at + SCAN_MS);
      const nextOffset = this.readOffset(next === end ? end - 1000 : next);
      if (nextOffset === offset) continue;
      let lo = at;
      let hi = next === end ? end - 1000 : next;
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
        if (this.readOffset(mid) === offset) lo = mid;
        else hi = mid;
      }
      changes.push({ at: hi, offset: nextOffset });
      offset = nextOffset;
    }
    known = { startOffset, changes };
    if (this.years.size >= YEARS_KEPT) this.years.delete(this.years.keys().next().value as number);
    this.years.set(year, known);
    return known;
  }

  /**
   * The instants at which the wall clock reads `wallMs` (a wall time written as if it were UTC):
   * one; two, earlier first, in an hour the clocks go back over; none in a gap the clocks skip,
   * and then `afterGap`, the first instant after it.
   */
  instantsOf(wallMs: number): { instants: number[]; afterGap?: number } {
    // The offsets in force a day either side: no zone changes twice within two days.
    const before = this.offsetMs(wallMs - DAY_MS);
    const after = this.offsetMs(wallMs + DAY_MS);
    const instants = [...new Set([wallMs - before, wallMs - after])]
      .filter((t) => this.offsetMs(t) === wallMs - t)
      .sort((a, b) => a - b);
    if (instants.length > 0) return { instants };
    // A gap: the clocks jumped from `before` to `after` (after > before), between the two
    // instants the wall time would have had.
    const jump = this.transitionsBetween(wallMs - after, wallMs - before)[0] ?? wallMs - before;
    return { instants: [], afterGap: jump };
  }

  /** The instants in [fromMs, toMs] at which the offset changes, each the first second of the new one. */
  transitionsBetween(fromMs: number, toMs: number): number[] {
    const found: number[] = [];
    for (let year = new Date(fromMs).getUTCFullYear(); year <= new Date(toMs).getUTCFullYear(); year++) {
      for (const change of this.yearOf(year).changes) if (change.at >= fromMs && change.at <= toMs) found.push(change.at);
    }
    return found;
  }
}

interface ZoneYear {
  startOffset: number;
  changes: Array<{ at: number; offset: number }>;
}

const DAY_MS = 86_400_000;
/** Zones change their offset at most a few times a year, never twice within this. */
const SCAN_MS = 12 * 3_600_000;
/** Years of offsets kept per zone: a schedule looks at this year and the next. */
const YEARS_KEPT = 64;
