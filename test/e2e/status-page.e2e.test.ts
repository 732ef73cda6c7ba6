/**
 * Issue 16, the status page in a real browser: headless Chromium (Debian's, driven by
 * playwright-core) against `baton start` with three instance processes. The page must show the
 * leader, a run's progress must advance on it, and after `--kill-leader-after` kill -9s the
 * leader, the page must show the new leader and why leadership moved. A screenshot is left in
 * test-results/ for a person to look at.
 *
 * Skipped, saying so, only where no Chromium is installed; `.ci/run` installs it.
 */
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import {
  cliPath,
  instanceLogDir,
  killAllSpawned,
  markDistInUse,
  projectRoot,
  spawnTracked,
  type SpawnedProcess,
  referenceApp,
} from '../support/cluster-process';
import { dumpOnFailure } from '../support/cluster-run';
import { patience } from '../support/slowdown';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path): path is string =>
  Boolean(path && existsSync(path)),
);
if (!CHROMIUM) {
  console.warn('status-page e2e SKIPPED: no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH)');
}

const releaseDist = markDistInUse();
let browser: Browser | undefined;

afterAll(async () => {
  await browser?.close();
  await killAllSpawned();
  releaseDist();
});

/**
 * Slow items, so the run is still open when the leader is killed 4 s in and when its successor
 * takes over once the lease expires (15 s), and goes on after. Beside it, a one-item job due
 * every 2 s, whose occurrences the page's schedule strip shows.
 */
const SLOW_JOB = JSON.stringify([
  { name: 'slow', items: 3000, slowEvery: 1, slowMs: 200 },
  { name: 'tick', items: 1, schedule: '*/2 * * * * *' },
]);

/** What the page's table rows are, in a test compiled without the DOM types. */
interface TableRow {
  cells: ArrayLike<{ textContent: string | null }>;
}

/** The `done` of each open run the page shows, from its "<done> / <planned> items" text. */
async function shownProgress(page: Page): Promise<number[]> {
  const texts = await page.locator('#open-runs .progress').allTextContents();
  return texts.map((t) => Number(/^(\d+)/.exec(t)?.[1] ?? NaN));
}

describe.skipIf(!CHROMIUM)('the status page in headless Chromium', () => {
  it(
    'shows the leader, a run advancing, and the new leader after the old one is kill -9d',
    { timeout: patience(240_000) },
    async () => {
      let cluster: SpawnedProcess | undefined;
      dumpOnFailure(() => cluster);
      const logs = instanceLogDir();
      cluster = spawnTracked(
        'cluster for the status page',
        process.execPath,
        [
          cliPath,
          ...[
            'start',
            '--app',
            referenceApp,
            '--once',
            '--job',
            'slow',
            '--instances',
            '3',
            '--port',
            '0',
            '--kill-leader-after',
            '4',
          ],
          ...['--log-dir', logs],
        ],
        { ...process.env, BATON_SYNTHETIC_JOBS: SLOW_JOB },
        logs,
      );
      const url = (await cluster.waitForLine(/^status page: (http:\/\/127\.0\.0\.1:\d+\/api\/baton\/page)/, 90_000)).match[1]!;

      // Playwright's own caps (30 s to launch, to navigate, to click) decide a hang like any other.
      browser = await chromium.launch({ executablePath: CHROMIUM!, args: ['--no-sandbox'], timeout: patience(30_000) });
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      page.setDefaultTimeout(patience(30_000));
      const errors: string[] = [];
      page.on('pageerror', (err) => errors.push(err.message));
      onTestFailed(async () => {
        await page
          .screenshot({ path: join(projectRoot, 'test-results', 'status-page-failed.png'), fullPage: true })
          .catch(() => {});
      });
      await page.goto(`${url}?refresh=500`);

      // Progress is sampled in the background the whole time: it must be seen to go up.
      const seen: number[] = [];
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          const shown = await shownProgress(page).catch(() => []);
          if (shown.length === 1 && Number.isFinite(shown[0])) seen.push(shown[0]!);
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      })();

      // The first leader, by the name its instance has.
      await expect
        .poll(() => page.locator('#leader').textContent(), { timeout: patience(90_000), interval: 250 })
        .toMatch(/^instance-\d+$/);
      const first = (await page.locator('#leader').textContent())!;
      expect(await page.locator('#hub').textContent()).toBe('baton');

      const kill = await cluster.waitForLine(/^kill -9 (instance-\d+) \(the leader/, 120_000);
      const victim = kill.match[1]!;

      // Another instance took over once the victim's lease expired, and the page says so.
      const takenOver = async (): Promise<boolean> => {
        const rows = await page
          .locator('#timeline tr')
          .evaluateAll((trs) => trs.map((tr) => Array.from((tr as unknown as TableRow).cells, (td) => td.textContent ?? '')));
        return rows.some(
          ([, holder, , why]) =>
            holder !== victim &&
            /^instance-\d+$/.test(holder ?? '') &&
            why === `previous lease expired (crash or pause) (after ${victim})`,
        );
      };
      await expect.poll(takenOver, { timeout: patience(120_000), interval: 250 }).toBe(true);
      await expect
        .poll(async () => (await page.locator('#leader').textContent()) ?? '', { timeout: patience(60_000), interval: 250 })
        .toMatch(new RegExp(`^(?!${victim}$)instance-\\d+$`));

      // The run went forward on the page: a later reading above an earlier one.
      await expect
        .poll(() => seen.some((done, i) => seen.slice(i + 1).some((later) => later > done)), {
          timeout: patience(120_000),
          interval: 250,
        })
        .toBe(true);
      expect(await page.locator('#open-runs .rate').count()).toBeGreaterThan(0);

      // The schedule strip: the tick job's occurrences, each started one with its lag on hover.
      const started = () =>
        page
          .locator('.occs[data-job="tick"] .occ[data-outcome="started"]')
          .evaluateAll((boxes) => boxes.map((box) => (box as unknown as { title: string }).title));
      await expect
        .poll(async () => (await started()).length, { timeout: patience(60_000), interval: 250 })
        .toBeGreaterThanOrEqual(2);
      const LAG = /(\d+ ms|\d+\.\d s|\d+ min \d+ s|\d+ h \d+ min)/.source;
      for (const title of await started()) expect(title).toMatch(new RegExp(` · started ${LAG} after its time$`));
      expect(await page.locator('#schedules tr', { hasText: 'tick' }).locator('.last-lag').textContent()).toMatch(
        new RegExp(`^${LAG}$`),
      );
      expect(await page.locator('#schedules-empty').isHidden()).toBe(true);

      // A run's failures open under it: this run has none, and says so.
      await page.locator('#open-runs .run').first().click();
      await expect
        .poll(() => page.locator('#failures-more').textContent(), { timeout: patience(30_000), interval: 250 })
        .toBe('no failures');
      expect(await page.locator('#failures-section').isVisible()).toBe(true);

      mkdirSync(join(projectRoot, 'test-results'), { recursive: true });
      await page.screenshot({ path: join(projectRoot, 'test-results', 'status-page.png'), fullPage: true });
      watching = false;
      await watcher;

      // What it had to show is shown; the run's own end is the cluster files' to check. A --once
      // cluster stopped before its run ended exits 130, as after Ctrl-C.
      process.kill(cluster.pid, 'SIGTERM');
      expect(await cluster.waitExit(60_000)).toEqual({ code: 130, signal: null });
      expect(errors).toEqual([]);
      expect(first).toMatch(/^instance-\d+$/);
    },
  );
});
