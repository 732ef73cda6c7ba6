/**
 * host.json's functionTimeout bounds every invocation, and a leader's term and each hook run
 * inside one: a term or hook bound the host would cut short is refused at start-up, with one line
 * naming both.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_FUNCTION_TIMEOUT_SECONDS, readHostQueueConfig, type HostQueueConfig } from '../../../src/app/host-config';
import { createBatonRuntime } from '../../../src/app/runtime';
import { InvalidConfigError } from '../../../src/errors';
import { defineJob } from '../../../src/jobs/define-job';
import type { HookTimeouts } from '../../../src/jobs/job-definition';

const dir = mkdtempSync(join(tmpdir(), 'baton-function-timeout-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function hostJson(body: object): string {
  const path = join(dir, `host-${++files}.json`);
  writeFileSync(path, JSON.stringify({ version: '2.0', ...body }));
  return path;
}

const ENV = { AzureWebJobsStorage: 'UseDevelopmentStorage=true' };
const HOST: HostQueueConfig = {
  batchSize: 16,
  newBatchThreshold: 8,
  maxDequeueCount: 5,
  retryDelaySeconds: 0,
  messageEncoding: 'none',
};

function job(hookTimeouts: HookTimeouts) {
  return defineJob({
    name: 'nightly',
    schedule: '0 0 2 * * *',
    hookTimeouts,
    async *split() {
      yield 1;
    },
    process: async (n: number) => n,
    aggregate: { initial: () => 0, add: (a: number, b: number) => a + b },
  });
}

describe("host.json's functionTimeout", () => {
  it.each([
    ['the shipped host.json', { functionTimeout: '00:10:00' }, {}, 600],
    ['none set: Flex Consumption default', {}, {}, DEFAULT_FUNCTION_TIMEOUT_SECONDS],
    ['-1: unbounded', { functionTimeout: '-1' }, {}, undefined],
    [
      'the app setting over host.json',
      { functionTimeout: '00:10:00' },
      { AzureFunctionsJobHost__functionTimeout: '00:05:00' },
      300,
    ],
  ])('reads %s', (_what, body, env, seconds) => {
    expect(readHostQueueConfig(hostJson(body), env).functionTimeoutSeconds).toBe(seconds);
  });

  it('refuses a malformed one, naming where it came from', () => {
    const path = hostJson({ functionTimeout: '10 minutes' });
    expect(() => readHostQueueConfig(path, {})).toThrow(`${path}: functionTimeout`);
    expect(() => readHostQueueConfig(hostJson({}), { AzureFunctionsJobHost__functionTimeout: 'soon' })).toThrow(
      /^AzureFunctionsJobHost__functionTimeout: must be a hh:mm:ss time span or -1$/,
    );
  });

  it.each<[string, HookTimeouts, string]>([
    ['finalize', { finalizeSeconds: 590, graceSeconds: 10 }, 'finalizeSeconds (590) plus graceSeconds (10)'],
    ['process', { processSeconds: 600, graceSeconds: 0 }, 'processSeconds (600) plus graceSeconds (0)'],
    ['split', { splitSeconds: 595, graceSeconds: 5 }, 'splitSeconds (595) plus graceSeconds (5)'],
  ])('refuses a %s bound the host would cut short, naming the job option and the timeout', (hook, bounds, said) => {
    let err: unknown;
    try {
      createBatonRuntime(ENV, { jobs: [job(bounds)], hostQueueConfig: { ...HOST, functionTimeoutSeconds: 600 } });
    } catch (caught) {
      err = caught;
    }
    expect(err).toBeInstanceOf(InvalidConfigError);
    expect((err as InvalidConfigError).option).toBe(`nightly.hookTimeouts.${hook}Seconds`);
    expect((err as Error).message).toBe(
      `job nightly: hookTimeouts.${hook}Seconds ${said.slice(`${hook}Seconds `.length)} must be less than host.json functionTimeout (600 s): the hook runs inside one invocation, which the host stops at its timeout`,
    );
  });

  it('accepts bounds inside it, and any bound when it is unbounded', () => {
    const within = { ...HOST, functionTimeoutSeconds: 600 };
    expect(() =>
      createBatonRuntime(
        { ...ENV, BATON_TERM_SECONDS: '590' },
        { jobs: [job({ finalizeSeconds: 589, graceSeconds: 10 })], hostQueueConfig: within },
      ),
    ).not.toThrow();
    expect(() =>
      createBatonRuntime(
        { ...ENV, BATON_TERM_SECONDS: '3600' },
        { jobs: [job({ finalizeSeconds: 3600 })], hostQueueConfig: HOST },
      ),
    ).not.toThrow();
  });
});
