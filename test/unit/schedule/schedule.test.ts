import { describe, expect, it } from 'vitest';
import { CronPattern } from 'croner';
import { InvalidConfigError } from '../../../src/errors.js';
import { decideOverlap, planOccurrences, Schedule } from '../../../src/schedule/schedule.js';
import { oneLineError } from '../../support/errors';

const at = (iso: string): Date => new Date(iso);
const isos = (dates: Date[]): string[] => dates.map((d) => d.toISOString());

function configError(fn: () => unknown): InvalidConfigError {
  const e = oneLineError(InvalidConfigError, fn);
  expect(e.code).toBe('InvalidConfig');
  return e;
}

describe('Schedule.parse and next', () => {
  it.each<[string, string, string, string[]]>([
    ['every 10 s', '*/10 * * * * *', '2024-03-10T10:00:00.000Z', ['2024-03-10T10:00:10.000Z', '2024-03-10T10:00:20.000Z']],
    ['every 10 s, mid-second start', '*/10 * * * * *', '2024-03-10T10:00:09.999Z', ['2024-03-10T10:00:10.000Z']],
    ['every 5 min', '0 */5 * * * *', '2024-03-10T10:02:30.000Z', ['2024-03-10T10:05:00.000Z', '2024-03-10T10:10:00.000Z']],
    // 2024-03-08 is a Friday: the next weekday 09:00 after Friday 09:00 is Monday.
    ['weekdays 09:00', '0 0 9 * * 1-5', '2024-03-08T09:00:00.000Z', ['2024-03-11T09:00:00.000Z', '2024-03-12T09:00:00.000Z']],
    ['weekday names', '0 0 9 * * MON-FRI', '2024-03-08T09:00:00.000Z', ['2024-03-11T09:00:00.000Z']],
    ['month boundary', '0 0 0 1 * *', '2024-01-31T12:00:00.000Z', ['2024-02-01T00:00:00.000Z', '2024-03-01T00:00:00.000Z']],
    [
      '31st skips short months',
      '0 0 0 31 * *',
      '2024-01-31T00:00:00.000Z',
      ['2024-03-31T00:00:00.000Z', '2024-05-31T00:00:00.000Z'],
    ],
    ['leap day', '0 0 0 29 2 *', '2024-03-01T00:00:00.000Z', ['2028-02-29T00:00:00.000Z']],
    ['year boundary', '59 59 23 31 12 *', '2024-06-01T00:00:00.000Z', ['2024-12-31T23:59:59.000Z', '2025-12-31T23:59:59.000Z']],
    ['Sunday as 0', '0 30 6 * * 0', '2024-03-10T06:30:00.000Z', ['2024-03-17T06:30:00.000Z', '2024-03-24T06:30:00.000Z']],
    // NCrontab requires both day fields to match: Friday the 13th, not every Friday or 13th.
    [
      'day of month AND day of week',
      '0 0 0 13 * 5',
      '2024-01-01T00:00:00.000Z',
      ['2024-09-13T00:00:00.000Z', '2024-12-13T00:00:00.000Z'],
    ],
    [
      'single value with step (NCrontab 5/20)',
      '5/20 * * * * *',
      '2024-03-10T10:00:00.000Z',
      ['2024-03-10T10:00:05.000Z', '2024-03-10T10:00:25.000Z'],
    ],
    [
      '5 fields: every minute at second 0',
      '* * * * *',
      '2024-03-10T10:00:00.000Z',
      ['2024-03-10T10:01:00.000Z', '2024-03-10T10:02:00.000Z'],
    ],
    ['5 fields: weekdays 09:00', '0 9 * * 1-5', '2024-03-08T09:00:00.000Z', ['2024-03-11T09:00:00.000Z']],
    ['extra whitespace', '  0  */5 * * * *  ', '2024-03-10T10:02:30.000Z', ['2024-03-10T10:05:00.000Z']],
  ])('%s: %s after %s', (_name, expression, after, expected) => {
    const schedule = Schedule.parse(expression);
    expect(schedule.expression).toBe(expression);
    const got: string[] = [];
    let cursor: Date | undefined = at(after);
    for (const _ of expected) {
      cursor = schedule.next(cursor!);
      expect(cursor).toBeDefined();
      got.push(cursor!.toISOString());
    }
    expect(got).toEqual(expected);
  });

  it('returns undefined when the schedule never fires', () => {
    expect(Schedule.parse('0 0 0 30 2 *').next(at('2024-01-01T00:00:00Z'))).toBeUndefined();
  });
});

describe('Schedule.parse rejects', () => {
  it.each<[string, string, RegExp]>([
    ['empty', '', /got 0/],
    ['one field', '*', /got 1/],
    ['four fields', '* * * *', /got 4/],
    ['seven fields (year)', '0 0 0 * * * 2024', /got 7/],
    ['@daily', '@daily', /@ shortcuts/],
    ['garbage', 'every day at noon please', /unsupported element|got/],
    ['second 60', '60 * * * * *', /second value 60 is out of range 0-59/],
    ['minute 60', '0 60 * * * *', /minute value 60/],
    ['hour 24', '0 0 24 * * *', /hour value 24 is out of range 0-23/],
    ['day 0', '0 0 0 0 * *', /day-of-month value 0 is out of range 1-31/],
    ['day 32', '0 0 0 32 * *', /day-of-month value 32/],
    ['month 13', '0 0 0 * 13 *', /month value 13 is out of range 1-12/],
    ['Sunday as 7', '0 0 0 * * 7', /day-of-week value 7 is out of range 0-6/],
    ['L (last day)', '0 0 0 L * *', /unsupported element "L"/],
    ['# (nth weekday)', '0 0 0 * * 5#2', /unsupported element "5#2"/],
    ['? placeholder', '0 0 0 ? * *', /unsupported element/],
    ['unknown name', '0 0 0 * * FUN', /unknown name "FUN"/],
    ['name in a numeric field', '0 0 MON * * *', /unknown name "MON"/],
    ['step 0', '*/0 * * * * *', /step must be at least 1/],
    ['backwards range', '0 0 0 * * 5-2', /5-2/],
    ['empty list element', '0 0,,5 * * * *', /unsupported element ""/],
  ])('%s: "%s"', (_name, expression, reason) => {
    const e = configError(() => Schedule.parse(expression, 'jobs[0].schedule'));
    expect(e.option).toBe('jobs[0].schedule');
    expect(e.message).toContain(`jobs[0].schedule "${expression}" is not a valid NCRONTAB expression: `);
    expect(e.message).toMatch(reason);
  });

  it('defaults the option name to "schedule" and keeps a multi-line input on one line', () => {
    const e = configError(() => Schedule.parse('0 0\n0 * * * *'));
    expect(e.option).toBe('schedule');
    expect(e.message).toMatch(/^schedule "0 0\\n0 \* \* \* \*" is not a valid NCRONTAB expression: .*got 7$/);
  });
});

describe('Schedule.occurrencesBetween', () => {
  const everyMinute = Schedule.parse('0 * * * * *');

  it('excludes the start and includes the end', () => {
    const r = everyMinute.occurrencesBetween(at('2024-03-10T10:00:00Z'), at('2024-03-10T10:03:00Z'), 10);
    expect(isos(r.occurrences)).toEqual(['2024-03-10T10:01:00.000Z', '2024-03-10T10:02:00.000Z', '2024-03-10T10:03:00.000Z']);
    expect(r.truncated).toBe(false);
    expect(r.total).toBe(3);
  });

  it('honours milliseconds on both bounds', () => {
    const r = everyMinute.occurrencesBetween(at('2024-03-10T09:59:59.999Z'), at('2024-03-10T10:01:59.999Z'), 10);
    expect(isos(r.occurrences)).toEqual(['2024-03-10T10:00:00.000Z', '2024-03-10T10:01:00.000Z']);
  });

  it('is empty for an empty or reversed window', () => {
    const t = at('2024-03-10T10:00:00Z');
    expect(everyMinute.occurrencesBetween(t, t, 10)).toEqual({ occurrences: [], truncated: false, total: 0 });
    expect(everyMinute.occurrencesBetween(t, at('2024-03-10T09:00:00Z'), 10).occurrences).toEqual([]);
  });

  it('keeps the newest occurrences when truncated', () => {
    const r = everyMinute.occurrencesBetween(at('2024-03-10T10:00:00Z'), at('2024-03-10T11:00:00Z'), 3);
    expect(isos(r.occurrences)).toEqual(['2024-03-10T10:58:00.000Z', '2024-03-10T10:59:00.000Z', '2024-03-10T11:00:00.000Z']);
    expect(r.truncated).toBe(true);
    expect(r.total).toBe(60);
  });

  it.each<[string, string, string, string]>([
    ['every second, ragged edges', '* * * * * *', '2024-03-10T10:17:42.300Z', '2024-03-10T11:21:49.000Z'],
    ['every second across midnight', '* * * * * *', '2024-03-09T23:58:30.500Z', '2024-03-10T00:01:30.000Z'],
    ['weekdays 09:00 across a weekend', '0 0 9 * * 1-5', '2024-03-01T00:00:00.000Z', '2024-03-11T09:00:00.000Z'],
    ['every 10 s in minutes 0-29', '*/10 0-29 * * * *', '2024-03-09T23:59:50.000Z', '2024-03-10T03:10:10.000Z'],
  ])('counts whole units at once: %s', (_name, expression, after, until) => {
    // The unit-wise total must equal a plain walk over the same window.
    const schedule = Schedule.parse(expression);
    let walked = 0;
    for (let t = schedule.next(at(after)); t && t <= at(until); t = schedule.next(t)) walked++;
    expect(schedule.occurrencesBetween(at(after), at(until), 1).total).toBe(walked);
  });
});

describe('planOccurrences', () => {
  const everyMinute = Schedule.parse('0 * * * * *');
  const base = { schedule: everyMinute, startingDeadlineSeconds: 60, catchUp: 'latest' as const };

  it('runs nothing on the first check of a new job', () => {
    const now = at('2024-03-10T10:00:00Z');
    expect(planOccurrences({ ...base, lastChecked: undefined, now, firstCheck: 'now' })).toEqual({
      run: [],
      missed: [],
      skipped: [],
      missedTruncated: false,
      missedCount: 0,
      checkedUntil: now,
    });
  });

  it('runs one due occurrence', () => {
    const now = at('2024-03-10T10:01:05Z');
    const plan = planOccurrences({ ...base, lastChecked: at('2024-03-10T10:00:30Z'), now });
    expect(isos(plan.run)).toEqual(['2024-03-10T10:01:00.000Z']);
    expect(plan.missed).toEqual([]);
    expect(plan.missedCount).toBe(0);
    expect(plan.checkedUntil).toEqual(now);
  });

  it.each<['latest' | 'all', string[], string[]]>([
    [
      'latest',
      ['2024-03-10T10:05:00.000Z'],
      ['2024-03-10T10:01:00.000Z', '2024-03-10T10:02:00.000Z', '2024-03-10T10:03:00.000Z', '2024-03-10T10:04:00.000Z'],
    ],
    [
      'all',
      ['2024-03-10T10:03:00.000Z', '2024-03-10T10:04:00.000Z', '2024-03-10T10:05:00.000Z'],
      ['2024-03-10T10:01:00.000Z', '2024-03-10T10:02:00.000Z'],
    ],
  ])('several due with catchUp %s', (catchUp, run, missed) => {
    // Deadline 150 s at 10:05:30: 10:03, 10:04, 10:05 are due; 10:01 and 10:02 are too old.
    const plan = planOccurrences({
      ...base,
      catchUp,
      startingDeadlineSeconds: 150,
      lastChecked: at('2024-03-10T10:00:00Z'),
      now: at('2024-03-10T10:05:30Z'),
    });
    expect(isos(plan.run)).toEqual(run);
    expect(isos(plan.missed)).toEqual(missed);
    expect(plan.missedCount).toBe(missed.length);
    expect(plan.missedTruncated).toBe(false);
  });

  it.each<[string, string, boolean]>([
    ['exactly at the deadline is due', '2024-03-10T10:01:30.000Z', true],
    ['one ms past the deadline is missed', '2024-03-10T10:01:30.001Z', false],
  ])('%s', (_name, now, due) => {
    // The 10:01:00 occurrence with a 30 s deadline.
    const plan = planOccurrences({ ...base, startingDeadlineSeconds: 30, lastChecked: at('2024-03-10T10:00:30Z'), now: at(now) });
    expect(plan.run.length).toBe(due ? 1 : 0);
    expect(isos(plan.missed)).toEqual(due ? [] : ['2024-03-10T10:01:00.000Z']);
  });

  it('truncates a long outage but still runs the latest', () => {
    const plan = planOccurrences({
      schedule: Schedule.parse('* * * * * *'),
      lastChecked: at('2024-03-10T10:00:00Z'),
      now: at('2024-03-10T12:00:00Z'),
      startingDeadlineSeconds: 10,
      catchUp: 'latest',
    });
    expect(isos(plan.run)).toEqual(['2024-03-10T12:00:00.000Z']);
    expect(plan.missedTruncated).toBe(true);
    expect(plan.missed).toHaveLength(999);
    expect(plan.missed[0]!.toISOString()).toBe('2024-03-10T11:43:21.000Z');
    expect(plan.missed.at(-1)!.toISOString()).toBe('2024-03-10T11:59:59.000Z');
    expect(plan.missedCount).toBe(2 * 3600 - 1);
  });

  it('gives nothing when lastChecked equals now', () => {
    const now = at('2024-03-10T10:01:00Z');
    const plan = planOccurrences({ ...base, lastChecked: now, now });
    expect(plan).toEqual({ run: [], missed: [], skipped: [], missedTruncated: false, missedCount: 0, checkedUntil: now });
  });

  it('never moves checkedUntil back when the clock went backwards', () => {
    const lastChecked = at('2024-03-10T10:01:00Z');
    const plan = planOccurrences({ ...base, lastChecked, now: at('2024-03-10T10:00:00Z') });
    expect(plan.run).toEqual([]);
    expect(plan.checkedUntil).toEqual(lastChecked);
  });
});

describe('decideOverlap', () => {
  it.each<['skip' | 'allow' | 'replace', string[], ReturnType<typeof decideOverlap>]>([
    ['skip', [], { start: true, cancel: [] }],
    ['skip', ['run-a', 'run-b'], { start: false, cancel: [], skippedBecause: 'runs run-a, run-b are still active' }],
    ['allow', [], { start: true, cancel: [] }],
    ['allow', ['run-a', 'run-b'], { start: true, cancel: [] }],
    ['replace', [], { start: true, cancel: [] }],
    ['replace', ['run-a', 'run-b'], { start: true, cancel: ['run-a', 'run-b'] }],
  ])('%s with %j active', (policy, active, expected) => {
    expect(decideOverlap(policy, active)).toEqual(expected);
  });

  it('names the single active run when skipping', () => {
    expect(decideOverlap('skip', ['run-a']).skippedBecause).toBe('run run-a is still active');
  });

  it('does not share the caller array', () => {
    const active = ['run-a'];
    expect(decideOverlap('replace', active).cancel).not.toBe(active);
  });
});

describe('Schedule.fixedPeriod', () => {
  it.each([
    ['*/2 * * * * *', { periodMs: 2000, offsetMs: 0 }],
    ['*/10 * * * * *', { periodMs: 10_000, offsetMs: 0 }],
    ['* * * * * *', { periodMs: 1000, offsetMs: 0 }],
    ['5/10 * * * * *', { periodMs: 10_000, offsetMs: 5000 }],
    ['0 */5 * * * *', { periodMs: 300_000, offsetMs: 0 }],
    ['0 0 * * * *', { periodMs: 3_600_000, offsetMs: 0 }],
    ['30 30 */6 * * *', { periodMs: 21_600_000, offsetMs: 1_830_000 }],
    ['0 0 0 * * *', { periodMs: 86_400_000, offsetMs: 0 }],
  ])('%s fires on a fixed grid %j', (expression, grid) => {
    expect(Schedule.parse(expression).fixedPeriod()).toEqual(grid);
  });

  it.each([
    '*/7 * * * * *',
    '0,10 * * * * *',
    '0,15,20,45 * * * * *',
    '0 0 9 * * 1-5',
    '0 0 0 1 1 *',
    // Every second, but only on some days: a grid within a day is not one across days.
    '* * * 1 * *',
    '*/2 * * * 1 *',
  ])('%s does not', (expression) => {
    expect(Schedule.parse(expression).fixedPeriod()).toBeUndefined();
  });

  it("agrees with a walk over the day's seconds for every mix of fields", () => {
    // The oracle lists the seconds of a day the fields fire on, and asks whether they are evenly spaced.
    const walk = (expression: string) => {
      const { second, minute, hour } = new CronPattern(expression, 'UTC', { mode: '6-part', sloppyRanges: true });
      const fired: number[] = [];
      for (let h = 0; h < 24; h++)
        for (let m = 0; m < 60; m++)
          for (let s = 0; s < 60; s++) if (hour[h] && minute[m] && second[s]) fired.push(h * 3600 + m * 60 + s);
      const period = 86_400 / fired.length;
      const even = Number.isInteger(period) && fired.every((at, i) => at === fired[0]! + i * period);
      return even ? { periodMs: period * 1000, offsetMs: fired[0]! * 1000 } : undefined;
    };
    const seconds = ['*', '*/2', '*/7', '5/10', '0', '15', '0,30', '0,15,20,45', '*/15', '1/20', '0-29/3', '*/30'];
    const minutes = ['*', '0', '*/5', '7', '0,30', '*/7', '10/20', '*/2'];
    const hours = ['*', '0', '*/6', '3/8', '0,12', '*/5', '1', '*/2'];
    let fixed = 0;
    for (const s of seconds)
      for (const m of minutes)
        for (const h of hours) {
          const expression = `${s} ${m} ${h} * * *`;
          const expected = walk(expression);
          if (expected) fixed++;
          expect(Schedule.parse(expression).fixedPeriod(), expression).toEqual(expected);
        }
    // Both kinds are in the mix.
    expect(fixed).toBeGreaterThan(30);
    expect(fixed).toBeLessThan(seconds.length * minutes.length * hours.length - 30);
  });
});
