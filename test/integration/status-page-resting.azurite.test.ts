/**
 * The status page of a hub whose leader rests (issue 31): nothing open, nothing due for a while,
 * so the leader marked the lease resting and returned. The page must say so in a real browser,
 * with until when and who led last, rather than "no leader". The hub is real (Azurite, the app's
 * own coordinator tick and HTTP handlers, served as the local host serves them); the browser is
 * Debian's headless Chromium.
 *
 * Skipped, saying so, only where no Chromium is installed; `.ci/run` installs it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { InvocationContext, type Timer } from '@azure/functions';
import { chromium, type Browser } from 'playwright-core';
import { batonRegistrations } from '../../src/app/registrations';
import type { HttpRegistration, TimerRegistration } from '../../src/app/registration-types';
import { createBatonRuntime } from '../../src/app/runtime';
import { serveHttpRegistrations, type LocalHttpServer } from '../../src/local/http-server';
import { useAzurite } from '../support/azurite';
import { sumJob } from '../support/sample-jobs';
import { patience } from '../support/slowdown';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path): path is string =>
  Boolean(path && existsSync(path)),
);
if (!CHROMIUM) {
  console.warn('status page (resting) SKIPPED: no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH)');
}

const fixture = useAzurite();
const timer: Timer = {
  isPastDue: false,
  schedule: { adjustForDST: true },
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
};
let browser: Browser | undefined;
let server: LocalHttpServer | undefined;

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe.skipIf(!CHROMIUM)('the status page of a resting hub, in headless Chromium', () => {
  it('says the hub rests, until when, and who led last', { timeout: patience(120_000) }, async () => {
    const env = {
      AzureWebJobsStorage: fixture.azurite.connectionString,
      BATON_HUB: fixture.uniqueName('resting'),
      BATON_TERM_SECONDS: '5',
    };
    // Due once a year: nothing open, nothing due before the rest's 10-minute cap.
    const runtime = createBatonRuntime(env, { jobs: [sumJob({ items: 1, schedule: '0 0 0 1 1 *' })] });
    const registrations = batonRegistrations(runtime);
    const coordinator = registrations.find((r): r is TimerRegistration => r.kind === 'timer')!;
    const http = registrations.filter((r): r is HttpRegistration => r.kind === 'http');

    // One tick, as the host calls it: the leader finds nothing to do, says it rests, and returns.
    await coordinator.handler(timer, new InvocationContext({ functionName: coordinator.name, invocationId: 'tick-1' }));
    const epoch = (await runtime.reads.lease.read())?.epoch;
    expect(epoch).toBeGreaterThan(0);

    server = await serveHttpRegistrations(http, { port: 0, log: () => undefined });
    browser = await chromium.launch({ executablePath: CHROMIUM!, args: ['--no-sandbox'], timeout: patience(30_000) });
    const page = await browser.newPage();
    page.setDefaultTimeout(patience(30_000));
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${server.origin}/api/baton/page`);

    await expect.poll(() => page.locator('#leader').textContent(), { timeout: patience(30_000), interval: 200 }).toBe('resting');
    const identity = runtime.elector.identity;
    expect(await page.locator('#leader-detail').textContent()).toMatch(
      new RegExp(`^until .+ · nothing open or due before then; a trigger wakes it · last ${identity}, epoch ${epoch}$`),
    );
    expect(errors).toEqual([]);
  });
});
