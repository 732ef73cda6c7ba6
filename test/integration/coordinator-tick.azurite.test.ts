import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { InvocationContext, type Timer } from '@azure/functions';
import { createCoordinatorTick, type LeaderWork, type TickOutcome } from '../../src/app/coordinator-tick';
import { batonRegistrations } from '../../src/app/registrations';
import { createBatonRuntime } from '../../src/app/runtime';
import { join } from 'node:path';
import { useAzurite } from '../support/azurite';
import { projectRoot, requireCurrentDist } from '../support/cluster-process';
import { gate } from '../support/edge-support';
import { patience } from '../support/slowdown';

const fixture = useAzurite();

/**
 * The compiled entry point, as the Functions host loads it (package.json `main`), in a process of
 * its own. Not spawnSync: Azurite answers from this process, and must keep answering meanwhile.
 */
function loadEntry(env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  requireCurrentDist();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(projectRoot, 'dist', 'functions', 'index.js')],
      // In the app's folder, where the host runs it and registerBaton finds its host.json.
      { cwd: join(projectRoot, 'functions'), env, encoding: 'utf8', timeout: patience(30_000) },
      (error, stdout, stderr) =>
        resolve({ status: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
    );
  });
}

const timer: Timer = {
  isPastDue: false,
  schedule: { adjustForDST: true },
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
};

function context(name: string, lines: string[]): InvocationContext {
  return new InvocationContext({
    functionName: 'baton-coordinator',
    invocationId: name,
    logHandler: (level, ...args) => lines.push(`${level} ${args.map(String).join(' ')}`),
  });
}

describe('coordinator tick', () => {
  it('of two instances ticking at once, exactly one leads; the other names the holder', async () => {
    const env = { AzureWebJobsStorage: fixture.azurite.connectionString, BATON_HUB: fixture.uniqueName('tick') };
    const instances = ['instance-a', 'instance-b'].map((identity) => createBatonRuntime(env, { identity }));
    const worked: string[] = [];
    let ticks: Array<Promise<TickOutcome>> = [];
    const work: LeaderWork = async (leadership, ctx) => {
      worked.push(leadership.identity);
      ctx.info(`leading at epoch ${leadership.epoch}`);
      // Lead until the other tick has returned, however slow its read: only then is "exactly
      // one leads" a statement about the race rather than about timing.
      await Promise.race(ticks);
    };
    const lines: string[] = [];
    ticks = instances.map((runtime, i) => createCoordinatorTick(runtime, work)(timer, context(`tick-${i}`, lines)));
    const outcomes = await Promise.all(ticks);
    expect(worked).toHaveLength(1);
    const leader = outcomes.find((o) => o.led === true);
    const follower = outcomes.find((o) => o.led === false);
    expect(leader).toEqual({ led: true, epoch: 1 });
    // The follower either lost the acquire race (no holder known yet) or read the holder.
    expect(follower?.led).toBe(false);
    expect(lines).toContain('information leading at epoch 1');
    // The term's storage cost is logged once it ends: at least the read, acquire, epoch bump and release.
    const cost = lines.find((l) => l.startsWith('information led epoch 1: '));
    expect(cost).toMatch(
      /^information led epoch 1: this instance sent \d+ storage requests during the term \(leader and worker\)$/,
    );
    expect(Number(/sent (\d+) storage/.exec(cost!)![1])).toBeGreaterThanOrEqual(4);
  });

  it('an overlapping tick on the leading instance does not run the work again', async () => {
    const env = { AzureWebJobsStorage: fixture.azurite.connectionString, BATON_HUB: fixture.uniqueName('overlap') };
    const runtime = createBatonRuntime(env, { identity: 'only-instance' });
    let runs = 0;
    const leading = gate();
    const overlapped = gate();
    const tick = createCoordinatorTick(runtime, async () => {
      runs++;
      leading.open();
      // The first term lasts until the second tick has returned, however slow either is, so the
      // two overlap for certain. A second run (the bug looked for) does not wait: it fails below, not hangs.
      if (runs === 1) await overlapped.promise;
    });
    const lines: string[] = [];
    const first = tick(timer, context('first', lines));
    // Once it leads; a first tick that did not lead returns, and the expectations below say so.
    await Promise.race([leading.promise, first]);
    const second = await tick(timer, context('second', lines)).finally(overlapped.open);
    expect(second).toEqual({ led: false, holder: 'only-instance', epoch: 1 });
    await expect(first).resolves.toEqual({ led: true, epoch: 1 });
    expect(runs).toBe(1);
    const third = await tick(timer, context('third', lines));
    expect(third).toEqual({ led: true, epoch: 2 });
  });

  it('registers the coordinator timer (schedule from settings) and the worker queue trigger on <hub>-work', () => {
    const runtime = createBatonRuntime({
      AzureWebJobsStorage: fixture.azurite.connectionString,
      BATON_HUB: 'nightly',
      BATON_COORDINATOR_SCHEDULE: '*/15 * * * * *',
    });
    const registrations = batonRegistrations(runtime);
    // Then the HTTP API's routes, which the API's own tests cover.
    expect(registrations.map((r) => r.kind)).toEqual(['timer', 'queue', ...Array(7).fill('http')]);
    expect(registrations[0]).toMatchObject({ name: 'baton-coordinator', schedule: '*/15 * * * * *' });
    expect(registrations[1]).toMatchObject({
      name: 'baton-worker',
      queueName: 'nightly-work',
      connection: 'AzureWebJobsStorage',
    });
  });

  it.each([
    [{}, 'AzureWebJobsStorage'],
    [{ AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_LEASE_SECONDS: '5' }, 'BATON_LEASE_SECONDS'],
    [{ AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_HUB: 'Not Valid' }, 'BATON_HUB'],
  ])('the Functions entry point fails at start-up with one line naming %j', async (env, setting) => {
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('AzureWebJobsStorage') && !k.startsWith('BATON_')),
    );
    const result = await loadEntry({ ...clean, ...env });
    expect(result.status).not.toBe(0);
    // Node prints the source line, then `Name: message`; the message is the one line.
    const line = result.stderr.split('\n').find((l) => l.startsWith('InvalidSettingError: '));
    expect(line).toMatch(new RegExp(`^InvalidSettingError: ${setting} `));
  });

  it('the Functions entry point loads with valid settings', async () => {
    // A reachable storage account: its start-up tick (a queue message) then lands at once, where
    // an unreachable one would spend the SDK's retries (about 15 s) before the process may exit.
    const result = await loadEntry({
      ...process.env,
      AzureWebJobsStorage: fixture.azurite.connectionString,
      BATON_HUB: fixture.uniqueName('entry'),
    });
    expect(result.stderr).not.toContain('Error');
    expect(result.status).toBe(0);
    // Outside the host, @azure/functions runs in test mode and reports each registration.
    expect(result.stdout + result.stderr).toContain('baton-coordinator');
  });
});
