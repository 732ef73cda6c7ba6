/**
 * Issue 4, acceptance 2, and issue 16, with real processes: `baton start --once
 * --kill-leader-after` kill -9s the leader mid-run while headless Chromium (Debian's, driven by
 * playwright-core) watches the cluster's status page. The page must show the leader, the run's
 * progress advancing, and after the kill the new leader and why leadership moved; the run must
 * still end with exactly the report the seed predicts, its record last written by a newer epoch.
 * One cluster serves both (each costs the machine about 30 s of CPU). A screenshot is left in
 * test-results/ for a person to look at. On its own, beside cluster.e2e.test.ts, because it is
 * the longest of the cluster runs.
 *
 * Only the page's part is skipped, saying so, where no Chromium is installed; `.ci/run` installs it.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { hubResources } from '../../src/hub/resources';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { startAzurite } from '../../src/local/azurite';
import { runKeys, type RunRecord } from '../../src/hub/run-record';
import { createBlobServiceClient } from '../../src/storage/client-factory';
import {
  cliPath,
  instanceLogDir,
  isRunning,
  killAllSpawned,
  leadershipAcquired,
  markDistInUse,
  projectRoot,
  spawnTracked,
  type SpawnedProcess,
  referenceApp,
  demoSetup,
} from '../support/cluster-process';
import { dumpOnFailure, expectExactRun, readOutputFile, runEnded } from '../support/cluster-run';
import { patience } from '../support/slowdown';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path): path is string =>
  Boolean(path && existsSync(path)),
);
if (!CHROMIUM) {
  console.warn('status-page e2e SKIPPED: no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH)');
}

const work = mkdtempSync(join(tmpdir(), 'baton-kill-leader-e2e-'));
const outputPath = join(work, 'failover.json');
const dataDir = join(work, 'failover-data');
const timings: string[] = [];
// cluster.e2e's `npm start` rebuilds dist/ in place; it waits until this file no longer spawns from it.
const releaseDist = markDistInUse();
let cluster: SpawnedProcess | undefined;
let started = 0;
let browser: Browser | undefined;

/**
 * Beside the sample job, a one-item job due every 2 s, whose occurrences the page's schedule
 * strip shows. With two jobs, `--once` is told which to run.
 */
const TICK_JOB = JSON.stringify([{ name: 'tick', items: 1, schedule: '*/2 * * * * *' }]);
/**
 * The run's 40 messages go out 16 at a time (the setting's least), so the new leader still has
 * most of them to send and count after the takeover, and the page sees the run go forward in
 * steps instead of all at once as the run ends.
 */
const MAX_IN_FLIGHT = '16';
/**
 * Messages the killed leader's own worker held come back after this (30 s by default) for
 * another instance to do. Longer than the takeover (about 4 s) and shorter than half a minute,
 * so the run is still open when the page is looked at after the kill, and ends soon after.
 */
const VISIBILITY_SECONDS = '10';

beforeAll(() => {
  started = Date.now();
  const logs = instanceLogDir();
  // --data keeps Azurite's state on disk, so the run record's writer epoch can be read after exit.
  cluster = spawnTracked(
    'cluster --kill-leader-after',
    process.execPath,
    [
      cliPath,
      ...['start', '--app', referenceApp, '--setup', demoSetup, '--once', '--job', 'blob-audit', '--instances', '3'],
      ...['--kill-leader-after', '3', '--port', '0', '--data', dataDir, '--output', outputPath, '--log-dir', logs],
    ],
    {
      ...process.env,
      BATON_SYNTHETIC_JOBS: TICK_JOB,
      BATON_MAX_IN_FLIGHT: MAX_IN_FLIGHT,
      BATON_LOCAL_VISIBILITY_SECONDS: VISIBILITY_SECONDS,
    },
    logs,
  );
});

afterAll(async () => {
  await browser?.close();
  await killAllSpawned();
  releaseDist();
  rmSync(work, { recursive: true, force: true });
  if (timings.length) console.log(`kill-leader e2e timings:\n  ${timings.join('\n  ')}`);
});

/** What the page's table rows are, in a test compiled without the DOM types. */
interface TableRow {
  cells: ArrayLike<{ textContent: string | null }>;
}

/** The `done` the page shows for `runId` while it is open, from its "<done> / <planned> items" text. */
async function shownProgress(page: Page, runId: string): Promise<number | undefined> {
  const texts = await page.locator(`#open-runs .run[data-run="${runId}"] .progress`).allTextContents();
  return texts.length === 1 ? Number(/^(\d+)/.exec(texts[0]!)?.[1] ?? NaN) : undefined;
}

describe('baton start --once --kill-leader-after (a real cluster on embedded Azurite)', () => {
  it.skipIf(!CHROMIUM)(
    'the status page in headless Chromium shows the leader, a run advancing, and the new leader after the old one is kill -9d',
    { timeout: patience(240_000) },
    async () => {
      const c = cluster!;
      dumpOnFailure(() => c);
      const url = (await c.waitForLine(/^status page: (http:\/\/127\.0\.0\.1:\d+\/api\/baton\/page)/, 90_000)).match[1]!;
      const runId = (await c.waitForLine(/^requested run (\S+)$/, 30_000)).match[1]!;

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

      // The run's progress is sampled in the background the whole time: it must be seen to go up.
      const seen: number[] = [];
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          const shown = await shownProgress(page, runId).catch(() => undefined);
          if (shown !== undefined && Number.isFinite(shown)) seen.push(shown);
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      })();

      // The first leader, by the name its instance has.
      await expect
        .poll(() => page.locator('#leader').textContent(), { timeout: patience(90_000), interval: 250 })
        .toMatch(/^instance-\d+$/);
      const first = (await page.locator('#leader').textContent())!;
      expect(await page.locator('#hub').textContent()).toBe('baton');

      const kill = await c.waitForLine(/^kill -9 (instance-\d+) \(the leader/, 120_000);
      const victim = kill.match[1]!;

      // Until a successor breaks the victim's lease nobody leads, so nothing can end the run: what
      // only an open run shows is looked at now. Its failures open under it: it has none, and says so.
      await page.locator(`#open-runs .run[data-run="${runId}"]`).click();
      expect(await page.locator('#open-runs .rate').count()).toBeGreaterThan(0);
      await expect
        .poll(() => page.locator('#failures-more').textContent(), { timeout: patience(30_000), interval: 250 })
        .toBe('no failures');
      expect(await page.locator('#failures-section').isVisible()).toBe(true);

      // Another instance took over once the victim's beats stopped (crash takeover breaks its
      // lease), and the page says so.
      const takenOver = async (): Promise<boolean> => {
        const rows = await page
          .locator('#timeline tr')
          .evaluateAll((trs) => trs.map((tr) => Array.from((tr as unknown as TableRow).cells, (td) => td.textContent ?? '')));
        return rows.some(
          ([, holder, , why]) =>
            holder !== victim &&
            /^instance-\d+$/.test(holder ?? '') &&
            why === `previous lease broken (its beats stopped: crash or pause) (after ${victim})`,
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

      // The schedule strip: the tick job's occurrences, a started one with its lag on hover, any
      // other with what became of it. How many start is the machine's pace, not a promise: the
      // first tick run stays open through the takeover (the next ones are skipped or missed, each
      // saying why), and the cluster stops when the sample run ends.
      const occurrences = () =>
        page.locator('.occs[data-job="tick"] .occ').evaluateAll((boxes) =>
          boxes.map((box) => ({
            outcome: (box as unknown as { dataset: { outcome?: string } }).dataset.outcome ?? '',
            title: (box as unknown as { title: string }).title,
          })),
        );
      await expect
        .poll(
          async () => {
            const shown = await occurrences();
            return shown.length >= 2 && shown.some((o) => o.outcome === 'started');
          },
          { timeout: patience(60_000), interval: 250 },
        )
        .toBe(true);
      const LAG = /(\d+ ms|\d+\.\d s|\d+ min \d+ s|\d+ h \d+ min)/.source;
      for (const { outcome, title } of await occurrences()) {
        if (outcome === 'started') expect(title).toMatch(new RegExp(` · started ${LAG} after its time$`));
        else expect(title).toMatch(new RegExp(` · ${outcome}: \\S`));
      }
      expect(await page.locator('#schedules tr', { hasText: 'tick' }).locator('.last-lag').textContent()).toMatch(
        new RegExp(`^${LAG}$`),
      );
      expect(await page.locator('#schedules-empty').isHidden()).toBe(true);
      // Its next occurrence on its zone's clock (UTC here), and the schedule with the instant on hover.
      const nextRun = page.locator('#schedules tr', { hasText: 'tick' }).locator('.next-run');
      expect(await nextRun.textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00$/);
      expect(await nextRun.getAttribute('title')).toMatch(/^\*\/2 \* \* \* \* \* in UTC · \d{4}-\d\d-\d\dT/);

      mkdirSync(join(projectRoot, 'test-results'), { recursive: true });
      await page.screenshot({ path: join(projectRoot, 'test-results', 'status-page.png'), fullPage: true });
      watching = false;
      await watcher;
      expect(errors).toEqual([]);
      expect(first).toMatch(/^instance-\d+$/);
      // The browser is done: the run's end below needs no page redrawn twice a second.
      await browser.close();
      browser = undefined;
    },
  );

  it(
    '--kill-leader-after: the leader is kill -9d mid-run, the run still ends exact, and a newer epoch wrote its record',
    { timeout: patience(120_000) },
    async () => {
      const c = cluster!;
      dumpOnFailure(() => c);
      const exit = await c.waitExit(110_000);
      timings.push(`--once --kill-leader-after 3: ${Date.now() - started} ms`);
      expect(exit).toEqual({ code: 0, signal: null });

      const file = readOutputFile(outputPath);
      expectExactRun(file);
      const runId = file.record.runId;

      // The kill lands mid-run: after the run was requested, before it ended.
      const requested = c.indexOf(new RegExp(`^requested run ${runId}$`));
      const kill = await c.waitForLine(/^kill -9 (instance-\d+) \(the leader, pid (\d+)\)/, 1_000);
      const ended = c.indexOf(runEnded(runId));
      expect(requested).toBeGreaterThanOrEqual(0);
      expect(ended).toBeGreaterThan(kill.index);
      expect(kill.index).toBeGreaterThan(requested);
      const victim = kill.match[1]!;
      expect(isRunning(Number(kill.match[2]))).toBe(false);

      // The victim led with some epoch; a different instance took over afterwards with a higher one.
      // (The victim's own line may reach the cluster just after the kill note, so look anywhere.)
      const acquired = leadershipAcquired(c.lines);
      const first = acquired.filter((a) => a.instance === victim).at(-1);
      expect(first, 'the killed instance had announced its leadership').toBeDefined();
      const next = acquired.find((a) => a.index > kill.index && a.instance !== victim);
      expect(next, 'a leader after the kill').toBeDefined();
      expect(next!.instance).not.toBe(victim);
      expect(next!.epoch).toBeGreaterThan(first!.epoch);
      timings.push(
        `failover: ${victim} epoch ${first!.epoch} -> ${next!.instance} epoch ${next!.epoch} in ${next!.at - c.lines[kill.index]!.at} ms`,
      );

      // The final run record was written by the newer leader: its fencing epoch is higher.
      const azurite = await startAzurite({ persistTo: dataDir });
      try {
        const blobs = createBlobServiceClient({ kind: 'connectionString', connectionString: azurite.connectionString });
        const docs = new FencedDocuments<RunRecord>(
          new BlobDocumentStore(blobs.getContainerClient(hubResources('baton').container)),
        );
        const stored = await docs.read(runKeys.record(runId));
        expect(stored?.value.state).toBe('succeeded');
        expect(stored!.epoch).toBeGreaterThan(first!.epoch);
        expect(stored!.epoch).toBeGreaterThanOrEqual(next!.epoch);
      } finally {
        await azurite.close();
      }
    },
  );
});
