import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InvalidConfigError } from '../../../src/errors';
import { assertUniqueJobs, defineJob } from '../../../src/jobs/define-job';
import type { JobOptions } from '../../../src/jobs/job-definition';
import { oneLineError } from '../../support/errors';

type Options = JobOptions<number, number, number, number>;

function base(overrides: Record<string, unknown> = {}): Options {
  return {
    name: 'tally',
    schedule: '0 */5 * * * *',
    split: () => [1, 2, 3],
    process: (n: number) => n * 2,
    aggregate: { initial: () => 0, add: (acc: number, r: number) => acc + r },
    ...overrides,
  } as Options;
}

function configError(fn: () => unknown): InvalidConfigError {
  const e = oneLineError(InvalidConfigError, fn);
  expect(e.code).toBe('InvalidConfig');
  return e;
}

describe('defineJob', () => {
  it('fills the defaults', () => {
    const job = defineJob(base());
    expect(job).toMatchObject({
      name: 'tally',
      schedule: '0 */5 * * * *',
      overlap: 'skip',
      startingDeadlineSeconds: 300,
      catchUp: 'latest',
      timeoutSeconds: 3600,
      failureTolerance: {},
      itemsPerMessage: 1,
      hookTimeouts: {
        splitSeconds: 300,
        processSeconds: 120,
        finalizeSeconds: 300,
        itemFailedSeconds: 30,
        graceSeconds: 10,
        maxSplitTimeouts: 3,
      },
      hedge: { maxPercent: 5, minWaitSeconds: 5, minCopies: 24 },
      // The engine fills in its deployment's defaults.
      retry: {},
    });
    expect(job.finalize).toBeUndefined();
    expect(job.itemSchema).toBeUndefined();
    expect(job.resultSchema).toBeUndefined();
    expect(Object.isFrozen(job)).toBe(true);
  });

  it.each([
    ['failureTolerance', {}],
    ['hookTimeouts', {}],
    ['hedge', {}],
    ['hedge', null],
    ['retry', {}],
  ])('fills %s left out as it fills %j given', (option, given) => {
    // A left-out option takes its default without its schema; given, the schema fills the same.
    const left = defineJob(base()) as unknown as Record<string, unknown>;
    const filled = defineJob(base({ [option]: given })) as unknown as Record<string, unknown>;
    expect(left[option]).toEqual(filled[option]);
  });

  it('keeps the options it is given', () => {
    const itemSchema = z.number();
    const resultSchema = z.number();
    const finalize = () => undefined;
    const job = defineJob(
      base({
        overlap: 'replace',
        startingDeadlineSeconds: 30,
        catchUp: 'all',
        timeoutSeconds: 60,
        failureTolerance: { count: 2, percent: 12.5 },
        itemsPerMessage: 1000,
        itemSchema,
        resultSchema,
        finalize,
      }),
    );
    expect(job).toMatchObject({
      overlap: 'replace',
      startingDeadlineSeconds: 30,
      catchUp: 'all',
      timeoutSeconds: 60,
      failureTolerance: { count: 2, percent: 12.5 },
      itemsPerMessage: 1000,
    });
    expect(job.itemSchema).toBe(itemSchema);
    expect(job.resultSchema).toBe(resultSchema);
    expect(job.finalize).toBe(finalize);
  });

  it.each<[string, unknown, unknown]>([
    ['off with false', false, false],
    ['off with maxPercent 0', { maxPercent: 0, minWaitSeconds: 2 }, false],
    ['a bound of its own', { maxPercent: 20 }, { maxPercent: 20, minWaitSeconds: 5, minCopies: 24 }],
    ['a floor of its own', { minWaitSeconds: 0.5 }, { maxPercent: 5, minWaitSeconds: 0.5, minCopies: 24 }],
    ['no least number of copies', { minCopies: 0 }, { maxPercent: 5, minWaitSeconds: 5, minCopies: 0 }],
  ])('takes hedge %s', (_name, hedge, expected) => {
    expect(defineJob(base({ hedge })).hedge).toEqual(expected);
  });

  it.each<[string, unknown, unknown]>([
    ['none', undefined, {}],
    ['attempts only', { attempts: 1 }, { attempts: 1 }],
    ['no delay', { delaySeconds: 0 }, { delaySeconds: 0 }],
    [
      'a whole schedule',
      { attempts: 8, delaySeconds: 0.5, backoff: 1.5, maxDelaySeconds: 30 },
      { attempts: 8, delaySeconds: 0.5, backoff: 1.5, maxDelaySeconds: 30 },
    ],
    ['fields left undefined are left out', { attempts: undefined, backoff: 3 }, { backoff: 3 }],
  ])('takes retry %s', (_name, retry, expected) => {
    const job = defineJob(base(retry === undefined ? {} : { retry }));
    expect(job.retry).toStrictEqual(expected);
    expect(Object.isFrozen(job.retry)).toBe(true);
  });

  it('a bad hedge option is one line naming the job and the option once', () => {
    const e = configError(() => defineJob(base({ hedge: { maxPercent: 150 } })));
    expect(e.message).toBe("job tally: hedge.maxPercent must be 0-100 (percent of the run's work messages; 0 turns hedging off)");
  });

  it('reads the schedule in UTC unless the job names a zone, kept by its canonical name', () => {
    expect(defineJob(base()).timeZone).toBe('UTC');
    expect(defineJob(base({ timeZone: 'Europe/Berlin' })).timeZone).toBe('Europe/Berlin');
    expect(defineJob(base({ timeZone: 'utc' })).timeZone).toBe('UTC');
  });

  it('accepts a 5-field schedule', () => {
    expect(defineJob(base({ schedule: '*/5 * * * *' })).schedule).toBe('*/5 * * * *');
  });

  it('wraps the aggregate; output defaults to the accumulator', () => {
    const job = defineJob(base());
    expect(job.aggregate.add(job.aggregate.add(job.aggregate.initial(), 4, { itemIndex: 0 }), 6, { itemIndex: 1 })).toBe(10);
    expect(job.aggregate.output(10)).toBe(10);
    const withOutput = defineJob(
      base({ aggregate: { initial: () => 0, add: (a: number, r: number) => a + r, output: (a: number) => a * 100 } }),
    );
    expect(withOutput.aggregate.output(3)).toBe(300);
  });

  it.each<[string, Record<string, unknown>, string, RegExp]>([
    ['name with capitals', { name: 'Tally' }, 'Tally.name', /lowercase/],
    ['name with a space', { name: 'my job' }, 'my job.name', /lowercase/],
    ['name with a leading hyphen', { name: '-tally' }, '-tally.name', /lowercase/],
    ['name with a trailing hyphen', { name: 'tally-' }, 'tally-.name', /lowercase/],
    ['name too long', { name: 'a'.repeat(49) }, `${'a'.repeat(49)}.name`, /1-48/],
    ['name empty', { name: '' }, 'job.name', /name/],
    ['name not a string', { name: 42 }, 'job.name', /must be a string/],
    ['schedule not a string', { schedule: 5 }, 'tally.schedule', /NCRONTAB/],
    ['schedule with 4 fields', { schedule: '* * * *' }, 'tally.schedule', /NCRONTAB.*got 4/],
    ['schedule out of range', { schedule: '0 61 * * * *' }, 'tally.schedule', /minute value 61/],
    ['schedule shortcut', { schedule: '@daily' }, 'tally.schedule', /@/],
    ['timeZone unknown', { timeZone: 'Europe/Atlantis' }, 'tally.timeZone', /"Europe\/Atlantis" is not a time zone/],
    ['timeZone empty', { timeZone: '' }, 'tally.timeZone', /is not a time zone/],
    ['timeZone not a string', { timeZone: 2 }, 'tally.timeZone', /IANA time zone name/],
    ['overlap unknown', { overlap: 'queue' }, 'tally.overlap', /'skip', 'allow' or 'replace'/],
    ['catchUp unknown', { catchUp: 'none' }, 'tally.catchUp', /'latest' or 'all'/],
    ['startingDeadlineSeconds zero', { startingDeadlineSeconds: 0 }, 'tally.startingDeadlineSeconds', /positive/],
    ['startingDeadlineSeconds negative', { startingDeadlineSeconds: -5 }, 'tally.startingDeadlineSeconds', /positive/],
    ['startingDeadlineSeconds fractional', { startingDeadlineSeconds: 1.5 }, 'tally.startingDeadlineSeconds', /whole seconds/],
    ['startingDeadlineSeconds a string', { startingDeadlineSeconds: '60' }, 'tally.startingDeadlineSeconds', /.+/],
    ['timeoutSeconds zero', { timeoutSeconds: 0 }, 'tally.timeoutSeconds', /positive/],
    ['timeoutSeconds fractional', { timeoutSeconds: 0.5 }, 'tally.timeoutSeconds', /whole seconds/],
    ['timeoutSeconds infinite', { timeoutSeconds: Number.POSITIVE_INFINITY }, 'tally.timeoutSeconds', /.+/],
    ['failureTolerance.percent over 100', { failureTolerance: { percent: 101 } }, 'tally.failureTolerance.percent', /0-100/],
    ['failureTolerance.percent negative', { failureTolerance: { percent: -1 } }, 'tally.failureTolerance.percent', /0-100/],
    ['failureTolerance.count negative', { failureTolerance: { count: -1 } }, 'tally.failureTolerance.count', /0 or more/],
    ['failureTolerance.count fractional', { failureTolerance: { count: 1.5 } }, 'tally.failureTolerance.count', /whole/],
    ['failureTolerance unknown key', { failureTolerance: { ratio: 0.1 } }, 'tally.failureTolerance', /ratio/],
    ['itemsPerMessage 0', { itemsPerMessage: 0 }, 'tally.itemsPerMessage', /at least 1/],
    ['itemsPerMessage over 1000', { itemsPerMessage: 1001 }, 'tally.itemsPerMessage', /at most 1000/],
    ['itemsPerMessage fractional', { itemsPerMessage: 2.5 }, 'tally.itemsPerMessage', /whole/],
    ['process missing', { process: undefined }, 'tally.process', /process/],
    ['process not a function', { process: 'run' }, 'tally.process', /must be a function/],
    ['split missing', { split: undefined }, 'tally.split', /split/],
    ['aggregate missing', { aggregate: undefined }, 'tally.aggregate', /.+/],
    ['aggregate.add missing', { aggregate: { initial: () => 0 } }, 'tally.aggregate.add', /must be a function/],
    ['aggregate.initial missing', { aggregate: { add: () => 0 } }, 'tally.aggregate.initial', /must be a function/],
    ['finalize not a function', { finalize: 1 }, 'tally.finalize', /must be a function/],
    ['onItemFailed not a function', { onItemFailed: 'log' }, 'tally.onItemFailed', /must be a function \(onItemFailed/],
    [
      'hookTimeouts.itemFailedSeconds zero',
      { hookTimeouts: { itemFailedSeconds: 0 } },
      'tally.hookTimeouts.itemFailedSeconds',
      /positive/,
    ],
    ['hookTimeouts.splitSeconds zero', { hookTimeouts: { splitSeconds: 0 } }, 'tally.hookTimeouts.splitSeconds', /positive/],
    [
      'hookTimeouts.processSeconds over a day',
      { hookTimeouts: { processSeconds: 86_401 } },
      'tally.hookTimeouts.processSeconds',
      /at most 86400/,
    ],
    [
      'hookTimeouts.finalizeSeconds a string',
      { hookTimeouts: { finalizeSeconds: '60' } },
      'tally.hookTimeouts.finalizeSeconds',
      /seconds/,
    ],
    [
      'hookTimeouts.graceSeconds negative',
      { hookTimeouts: { graceSeconds: -1 } },
      'tally.hookTimeouts.graceSeconds',
      /0 or more/,
    ],
    [
      'hookTimeouts.maxSplitTimeouts zero',
      { hookTimeouts: { maxSplitTimeouts: 0 } },
      'tally.hookTimeouts.maxSplitTimeouts',
      /at least 1/,
    ],
    ['hedge not an object', { hedge: true }, 'tally.hedge', /must be false or \{ maxPercent, minWaitSeconds, minCopies \}/],
    ['hedge.minCopies a fraction', { hedge: { minCopies: 2.5 } }, 'tally.hedge.minCopies', /whole number of copies/],
    ['hedge.minCopies negative', { hedge: { minCopies: -1 } }, 'tally.hedge.minCopies', /0-1000/],
    ['hedge.minCopies over 1000', { hedge: { minCopies: 1001 } }, 'tally.hedge.minCopies', /0-1000/],
    ['hedge a string', { hedge: 'on' }, 'tally.hedge', /must be false or/],
    ['hedge.maxPercent over 100', { hedge: { maxPercent: 101 } }, 'tally.hedge.maxPercent', /0-100/],
    ['hedge.maxPercent negative', { hedge: { maxPercent: -1 } }, 'tally.hedge.maxPercent', /0-100/],
    ['hedge.maxPercent a string', { hedge: { maxPercent: '5' } }, 'tally.hedge.maxPercent', /percentage/],
    ['hedge.minWaitSeconds negative', { hedge: { minWaitSeconds: -1 } }, 'tally.hedge.minWaitSeconds', /0 or more/],
    ['hedge.minWaitSeconds over a day', { hedge: { minWaitSeconds: 86_401 } }, 'tally.hedge.minWaitSeconds', /at most 86400/],
    ['hedge unknown key', { hedge: { percent: 5 } }, 'tally.hedge', /percent/],
    ['retry not an object', { retry: 3 }, 'tally.retry', /must be \{ attempts, delaySeconds, backoff, maxDelaySeconds \}/],
    ['retry.attempts 0', { retry: { attempts: 0 } }, 'tally.retry.attempts', /at least 1 \(the first try; 1 means no retry\)/],
    ['retry.attempts a fraction', { retry: { attempts: 2.5 } }, 'tally.retry.attempts', /whole number of tries/],
    ['retry.attempts over 100', { retry: { attempts: 101 } }, 'tally.retry.attempts', /at most 100/],
    ['retry.delaySeconds negative', { retry: { delaySeconds: -1 } }, 'tally.retry.delaySeconds', /0 or more/],
    ['retry.delaySeconds over an hour', { retry: { delaySeconds: 3601 } }, 'tally.retry.delaySeconds', /at most 3600/],
    ['retry.backoff under 1', { retry: { backoff: 0.5 } }, 'tally.retry.backoff', /at least 1/],
    ['retry.backoff over 10', { retry: { backoff: 11 } }, 'tally.retry.backoff', /at most 10/],
    [
      'retry.maxDelaySeconds below delaySeconds',
      { retry: { delaySeconds: 10, maxDelaySeconds: 5 } },
      'tally.retry.maxDelaySeconds',
      /at least delaySeconds/,
    ],
    ['retry unknown key', { retry: { tries: 3 } }, 'tally.retry', /tries/],
    ['hookTimeouts unknown key', { hookTimeouts: { planSeconds: 5 } }, 'tally.hookTimeouts', /planSeconds/],
    ['itemSchema not a Standard Schema', { itemSchema: { parse: () => 1 } }, 'tally.itemSchema', /Standard Schema/],
    ['resultSchema not a Standard Schema', { resultSchema: 'number' }, 'tally.resultSchema', /Standard Schema/],
  ])('%s throws InvalidConfigError on <job>.<path>', (_name, overrides, option, message) => {
    const e = configError(() => defineJob(base(overrides)));
    expect(e.option).toBe(option);
    expect(e.message).toMatch(message);
  });

  it('the message names the job and the path', () => {
    const e = configError(() => defineJob(base({ itemsPerMessage: 0 })));
    expect(e.message).toMatch(/tally/);
    expect(e.message).toMatch(/itemsPerMessage/);
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      'count',
      { count: -1 },
      'job tally: failureTolerance.count must be 0 or more (failed items a run may have and still succeed)',
    ],
    ['count', { count: -0.5 }, 'job tally: failureTolerance.count must be a whole number of failed items'],
    ['percent', { percent: -1 }, 'job tally: failureTolerance.percent must be 0-100 (percent of planned items)'],
    ['count', { count: '2' }, 'job tally: failureTolerance.count must be a number of failed items'],
  ])('a bad failureTolerance.%s is one line naming the job and the option once: %j', (field, tolerance, message) => {
    const e = configError(() => defineJob(base({ failureTolerance: tolerance })));
    expect(e.option).toBe(`tally.failureTolerance.${field}`);
    expect(e.message).toBe(message);
  });

  it('reports an invalid schedule even when every other option is fine, with the expression quoted', () => {
    const e = configError(() => defineJob(base({ schedule: '0 0 25 * * *' })));
    expect(e.option).toBe('tally.schedule');
    expect(e.message).toContain('"0 0 25 * * *"');
  });

  it('refuses undefined options without a TypeError', () => {
    const e = configError(() => defineJob(undefined as unknown as Options));
    expect(e.option).toMatch(/^job\./);
  });
});

describe('assertUniqueJobs', () => {
  it('accepts distinct names', () => {
    expect(() => assertUniqueJobs([defineJob(base({ name: 'a' })), defineJob(base({ name: 'b' }))])).not.toThrow();
    expect(() => assertUniqueJobs([])).not.toThrow();
  });

  it('refuses a name registered twice, naming it', () => {
    const e = configError(() =>
      assertUniqueJobs([defineJob(base({ name: 'a' })), defineJob(base({ name: 'b' })), defineJob(base({ name: 'a' }))]),
    );
    expect(e.option).toBe('a.name');
    expect(e.message).toMatch(/\ba\b.*twice/);
  });
});
