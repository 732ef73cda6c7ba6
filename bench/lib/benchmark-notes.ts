/**
 * The hand-written part of BENCHMARKS.md: per benchmark, what it measures and what limits the
 * figure. The figures themselves come from bench/results/<name>.json; keep run figures out of
 * these notes (they would go stale) and write here what stays true from run to run.
 *
 * The order of this record is the order of the table and of the sections in BENCHMARKS.md.
 * `draft` marks prose that still needs the lead's figures or confirmation: it is shown in the
 * generated file, so remove it once the text is checked.
 *
 * Arithmetic on a run's figures (what they mean on Azure) goes in `more`, which is handed the
 * latest result, so it is redone whenever the figures change instead of going stale as prose.
 *
 * Regenerate after editing: node --import tsx bench/lib/benchmarks-md.ts
 */
import { formatNumber } from './format';
import { summaryList, type BenchResult } from './report';

export interface BenchmarkNote {
  /** What the benchmark does, and what its floor is. Markdown. */
  measures: string;
  /** What bounds the figure: the protocol, the machine, Azurite. Markdown. */
  limits: string;
  /** Still to check or fill in; shown as a draft warning until removed. */
  draft?: string;
  /** The end of the section, from the latest result (undefined before the first run). Markdown lines. */
  more?: (result: BenchResult | undefined) => string[];
}

export type BenchmarkNotes = Record<string, BenchmarkNote>;

export const BENCHMARK_NOTES: BenchmarkNotes = {
  'crash-failover': {
    measures:
      'How long the cluster is without a leader when the leader dies. A local cluster of three real instance processes ' +
      'on one in-process Azurite, ticking every second (the `baton start` default); the leading process is killed with ' +
      "`kill -9`, and each trial times the kill until another instance's leader task runs (its `acquired` event). Ten " +
      "trials, the kills spread over the leader's real renewal cycle (read from its `renewed` events); ours is the p95. " +
      'The floor is the lease duration (15 s): after a crash storage gives the lease to nobody until it expires, so an ' +
      'election that waits for expiry cannot do better. The goal, p95 ≤ 5 s, is a third of it. This is where the ' +
      'failover figure is held: the SIGKILL e2e test (`test/e2e/failover.e2e.test.ts`) asserts only what a busy machine ' +
      'cannot break, a new leader with a higher epoch within two leases.',
    limits:
      '**The takeover silence.** The leader beats every 750 ms (one Set Blob Properties that changes the lease ' +
      "blob's ETag); a follower that finds the ETag unchanged for `BATON_TAKEOVER_MS` (3 s), by two of its reads or by " +
      "storage's `Date` against `Last-Modified` (to the second), breaks the lease at that ETag and acquires with the next " +
      'epoch. So a new leader leads about 3 s after the last beat plus up to a tick or two (the followers read on their ' +
      'ticks, and `Last-Modified` loses up to a second), whatever is left of the lease. The fake-clock tests in ' +
      '`test/unit/lease/leader-takeover.test.ts` hold the protocol (a dead leader, slow beats, a paused leader that ' +
      'wakes, two candidates breaking at once). **On Azure** a timer runs on one instance at a time, every 10 s by ' +
      'default, so the wake is that tick or the tick beacon (hidden 9 s after each renewal): not measured here. Work ' +
      'messages the dead instance held come back after their visibility timeout, which delays those items but not the ' +
      'takeover.',
  },
  'graceful-handover': {
    measures:
      'The **leaderless gap** when the leader leaves cleanly: from its last act as leader (its lease released) to the ' +
      "next leader's first (its `acquired` event, just before its task runs). A local cluster of three real instance " +
      'processes ticking every second; the leading process is stopped as the Functions host stops a worker, in two ' +
      "scenarios: the host's **WorkerTerminate** (a restart, a deploy: the `appTerminate` hook runs) and a **bare " +
      "SIGTERM** (a container deleted, a Flex scale-in: no hook, Baton's own SIGTERM handler runs the same shutdown); " +
      'either way the host kills the process 5 s after it asked. The leader hands over make-before-break: it marks the ' +
      'lease as leaving, surfaces its tick beacon and leads on until another instance asks for the lease; then it stops ' +
      'at its next safe point, reserves the lease for the requester and releases it, and the requester takes it. Ten ' +
      'trials of each scenario, alternating on one cluster, the stops spread over the tick cycle; per scenario the p50, ' +
      "p95 and max of the gaps; the **hook done** time, from the stop sent to the victim's `stop` event (Baton's record " +
      'of its stop: the lease handed over, released or not), and the `durationMs` that event reports, p50, p99 and max; ' +
      "how many victims the host's SIGKILL ended, and how many `stop` events said `not-released`. Stop → the next " +
      '`acquired` stays in the results as a diagnostic (`delayMs`): the old leader leads during it. The floor is the ' +
      'same storage event with the plain SDK on the same Azurite: one client releases a blob lease while a second, ' +
      'polling `acquireLease` every 50 ms, takes it (p95). The goals are absolute, each written as a ratio to the ' +
      'floor, which is why the ratios are not round numbers: WorkerTerminate gap p95 ≤ 200 ms (the headline); ' +
      'WorkerTerminate hook done ≤ 3 s at p99 with no victim killed mid-release (none SIGKILLed, none `not-released`); ' +
      'bare SIGTERM gap p95 ≤ 1 s. A diagnostic arm repeats the WorkerTerminate trials on a 2 s tick. The fake-clock ' +
      'tests in `test/unit/lease/leader-leaving.test.ts` hold the protocol (a successor in time, nobody in time, the ' +
      'leader dying mid-handover, two successors); this is where its timing is held.',
    limits:
      "**The successor's poll, then the epoch bump.** The requester reads the lease every 50 ms while a leaving holder " +
      'hands over (`LEAVING_POLL_MS`), so it sees the release 0 to 50 ms after it; then one acquire and the epoch bump ' +
      '(a read of the lease, the epoch mark read and written, the lease metadata written) before its task may run: ' +
      'the larger part of the gap. The fencing epoch is what makes the new leader safe, ' +
      'so that part stays. The tick no longer decides the gap, only how long the old leader leads on (`delayMs`: the ' +
      "followers see the leaving mark on their next tick or the beacon's wake, 0 to one tick), and it costs nothing while " +
      'idle: no follower looks more often. **The shutdown budget.** The hook and the signal handler run the same ' +
      'shutdown, which has the lease back within `shutdownGraceMs` (3 s by default): it waits a third of that for a ' +
      'successor to ask, then stops at a safe point, and abandons a task still running near the end (its writes are ' +
      "fenced); the host's kill at 5 s leaves the rest for telemetry to flush. So the hook done time is the old " +
      "leader's wait for a successor and its release, well inside 3 s unless a job's code holds the event loop. " +
      '**When nobody asks.** A leader whose successors are gone too (every instance stopped at once, as a Recreate ' +
      'deploy does on Azure) releases plainly after its wait; a successor then takes the lease on its next tick, as ' +
      'before make-before-break.',
    more: (result) => {
      const scenarios = summaryList<{
        name: string;
        title?: string;
        gapMs: { p50: number; p95: number; max: number };
        hookDoneMs: { p50: number; p99: number; max: number };
        stopDurationMs: { p50: number; p99: number; max: number };
        killedBySigkill: number;
        notReleased: number;
        noStopEvent?: number;
      }>(
        result,
        'scenarios',
        (s) =>
          typeof s.name === 'string' &&
          typeof (s.gapMs as { p95?: unknown } | undefined)?.p95 === 'number' &&
          typeof (s.hookDoneMs as { p99?: unknown } | undefined)?.p99 === 'number' &&
          typeof (s.stopDurationMs as { p99?: unknown } | undefined)?.p99 === 'number' &&
          typeof s.killedBySigkill === 'number' &&
          typeof s.notReleased === 'number',
      );
      if (scenarios.length === 0) return [];
      const ms = (v: number) => (Number.isFinite(v) ? `${formatNumber(v)}` : 'n/a');
      return [
        '**Both scenarios of the latest run** (ms; hook done = stop sent → the victim’s `stop` event; its `durationMs` as the victim counts it).',
        '',
        '| scenario | gap p50 / p95 / max | hook done p50 / p99 / max | durationMs p50 / p99 / max | SIGKILLed | not-released | no stop event |',
        '|---|---|---|---|---|---|---|',
        ...scenarios.map(
          (s) =>
            `| ${s.title ?? s.name} | ${ms(s.gapMs.p50)} / ${ms(s.gapMs.p95)} / ${ms(s.gapMs.max)} | ` +
            `${ms(s.hookDoneMs.p50)} / ${ms(s.hookDoneMs.p99)} / ${ms(s.hookDoneMs.max)} | ` +
            `${ms(s.stopDurationMs.p50)} / ${ms(s.stopDurationMs.p99)} / ${ms(s.stopDurationMs.max)} | ` +
            `${s.killedBySigkill} | ${s.notReleased} | ${s.noStopEvent ?? 'n/a'} |`,
        ),
        '',
      ];
    },
  },
  'start-lag': {
    measures:
      'How late scheduled runs start, as a user feels it: for every occurrence, from when it was due to its run record ' +
      "being created (start lag) and to its first item being counted (first-item lag), both by storage's clock. A local " +
      'cluster of three real instance processes ticking every second runs five synthetic jobs of four items, each due ' +
      'every 5 s at its own second, so one occurrence falls due every second and runs of one job never overlap. Eight ' +
      'scenarios of 100 s each, each on a fresh cluster, the instances stopped as the Functions host stops a worker ' +
      '(each killed 5 s after it was asked): steady; steady-blocking (a sixth job whose four items every 10 s each hold ' +
      'their instance’s event loop for 1 s, a synchronous busy loop); hook (the host’s WorkerTerminate to the leader ' +
      'every 10 s, its `appTerminate` hook runs, a replacement started at once); sigterm (a bare SIGTERM, no hook, the ' +
      'same cadence); sigkill (the leader killed every 35 s); rolling (a deploy from version 1 to 2, one instance at a ' +
      'time, each old one stopped by WorkerTerminate); drain (the leader put in drain mode every 10 s: invocations it ' +
      'started up to 3 s before are aborted 1 to 3 s in, and a bare SIGTERM follows once drained, or after 10 s); ' +
      'frozen (every timer off, with 8 s terms, so only tick messages move leadership). Per scenario: p50, p99 and max ' +
      'of both lags, the occurrences that did not run (skipped or missed, by the job state), duplicates, the leader ' +
      'changes (terms begun) in the window, and whether every run that started ended with its exact output (waited ' +
      "for up to 90 s). The floor is a bare timer's own lateness in the same run: a timeout in the benchmark process " +
      'aimed at each whole second of the steady window. The goals are absolute, written as ratios to the floor’s p99, ' +
      'and every one also needs no run started twice and every run ended and exact: p99 ≤ 250 ms with no takeover (a lease lost or broken) ' +
      'and nothing unrun, steady and steady-blocking (steady’s max ≤ 1 s); p99 ≤ 1 s with nothing unrun through ' +
      'WorkerTerminates, bare SIGTERMs, the rolling deploy, drains and frozen timers (the max ≤ 2 s through the first ' +
      'three); max ≤ 6 s with at most 1 occurrence in 10 unrun through SIGKILLs. The headline is the steady p99.',
    limits:
      '**A live leader starts runs itself.** Between turns it waits no longer than until the next occurrence of any ' +
      'job, and creates the run with one conditional write, so the start lag of a run due while a leader lives is that ' +
      "wait's own timer lateness and one write, unless something holds its event loop. **Items that compute.** An item " +
      'that computes synchronously holds the event loop of the instance that runs it, and the items of one batch run ' +
      'back to back: steady-blocking’s four 1 s items hold it for about 4 s, and on the leader’s instance every run ' +
      'due meanwhile started that late (p99 3.5 s), since coordination runs on the same thread as the workers. Now ' +
      'the leader’s own worker holds back an item whose hold would reach more than 100 ms past the next due instant ' +
      'until the leader has created that instant’s runs (`ItemStartGate`), learning each job’s holds from its own ' +
      'items and from every instance’s results, so its lateness is that slack and one write. The leader’s instance ' +
      'works less of such a job meanwhile; an item that cannot fit between two due instants starts after 5 s. The ' +
      'leader keeps its lease through it: its beats come from a worker thread, so a ' +
      'busy loop is not taken for a crash (no takeover in the window; before the beats moved off the loop, three). **A ' +
      'leader change.** A leader stopped by WorkerTerminate or a bare SIGTERM hands over make-before-break (see ' +
      'graceful-handover), so an occurrence due during the handover waits at most the leaderless gap; a rolling deploy ' +
      'is a string of such handovers, to the newer version. A drained leader leads on until the SIGTERM that ends the ' +
      'drain (the host aborts only invocations that started just before it, and even their code runs on in the ' +
      'worker), then hands over the same way. A killed leader leaves its lease to the takeover: occurrences due meanwhile start once ' +
      'a successor leads (the latest within its job’s starting deadline; the rest missed, as the job says). With every ' +
      'timer frozen, terms end on their own and the next leader is woken by the tick beacon through the queue. ' +
      "**First-item lag** adds the queue: an idle queue trigger backs off to host.json's `maxPollingInterval` (2 s " +
      "here), so the first work message of a run waits for a worker's next poll.",
    more: (result) => {
      const scenarios = summaryList<{
        name: string;
        due: number;
        started: number;
        duplicates: number;
        leaderChanges: number;
        notRun: { skipped: number; missed: number; unrecorded: number };
        runs?: { exact: number; inexact: number; unended: number };
        startLagMs: { p50: number; p99: number; max: number };
        firstItemLagMs: { p50: number; p99: number; max: number };
      }>(result, 'scenarios', (s) => typeof s.name === 'string' && typeof s.due === 'number');
      if (scenarios.length === 0) return [];
      const ms = (v: number) => (Number.isFinite(v) ? `${formatNumber(v)}` : 'n/a');
      const runs = (r: { exact: number; inexact: number; unended: number } | undefined) =>
        r ? `${r.exact} / ${r.inexact} / ${r.unended}` : 'n/a';
      return [
        '**Every scenario of the latest run** (ms; not run = skipped + missed + unrecorded; runs = ended exact / ended ' +
          'not exact / not ended).',
        '',
        '| scenario | due | started | not run | duplicates | runs | leader changes | start lag p50 / p99 / max | first item p50 / p99 / max |',
        '|---|---|---|---|---|---|---|---|---|',
        ...scenarios.map(
          (s) =>
            `| ${s.name} | ${s.due} | ${s.started} | ${s.notRun.skipped} + ${s.notRun.missed} + ${s.notRun.unrecorded} | ${s.duplicates} | ` +
            `${runs(s.runs)} | ${s.leaderChanges} | ${ms(s.startLagMs.p50)} / ${ms(s.startLagMs.p99)} / ${ms(s.startLagMs.max)} | ` +
            `${ms(s.firstItemLagMs.p50)} / ${ms(s.firstItemLagMs.p99)} / ${ms(s.firstItemLagMs.max)} |`,
        ),
        '',
      ];
    },
  },
  herd: {
    measures:
      'A thundering herd: 200 jobs due in the same second, with and without jitter. Two scenarios, each on a fresh ' +
      'local cluster of three real instance processes ticking every second, with the app’s defaults (an idle leader ' +
      'rests the lease between occurrences; a term lasts 60 s): **herd**, 200 synthetic jobs of one item on one ' +
      'schedule, every minute at one second, so 200 runs fall due at each occurrence’s instant (two occurrences, the ' +
      'second after a rest); and **jittered**, the same jobs every 5 minutes with `jitterSeconds` 240, each run due ' +
      'at its occurrence plus a fraction of 240 s drawn from a hash of job and occurrence (`src/schedule/jitter.ts`), ' +
      'one occurrence. The first measured occurrence is due once the first leader has written every job’s state. Per ' +
      'scenario: **peak storage requests per second**, every request Azurite serves to the cluster (the instances’ ' +
      'own and their local host’s queue polling, SDK retries included) timestamped where Azurite receives it, in the ' +
      'benchmark process (Node’s `http.server.request.start` diagnostics channel: no proxy, no extra hop), the most in ' +
      'any 1 s (a sliding window) from 3 s before each occurrence to 1 s after its last run ended, with the most in ' +
      'one whole clock second beside it; **start lag** (run record created, by storage’s clock, minus when it was ' +
      'due: with jitter the jittered start, `dueAt`), p50, p99 and max, and first-item lag; runs not created; whether ' +
      'every run ended with its exact output. The headline is the jittered peak against the herd’s, which is its ' +
      'floor: the goal is a fall of at least 5× (ratio ≤ 0.2), every run created, ended and exact. The second goal is ' +
      'absolute, jittered start lag p99 ≤ 250 ms, written as a ratio to a floor measured in the same run: a plain ' +
      'scheduler in the benchmark process aims a timer at each of the 200 jittered starts and makes one conditional ' +
      'create (`If-None-Match: *`) with the plain SDK on the same Azurite; the floor is the p99 of that create’s ' +
      'answer after its due time (when its timer ran, the instant a `createdAt` would be stamped, is kept beside it), ' +
      'and its requests are left out of the counts. `BENCH_HERD_OCCURRENCES` sets how many occurrences the herd ' +
      'measures (2). Local cluster only: on Azure storage the herd’s peak would be higher (it is what one leader, the ' +
      'workers and an in-process Azurite manage on two cores) and the jittered one the same.',
    limits:
      '**The herd’s peak is the cluster’s rate.** One leader starts the 200 runs one after another (per job: its ' +
      'state written, two run-index entries, the run record), then moves each open run a step per turn while the ' +
      'workers take the messages; the herd’s requests (about 25 a run) come out at what the cluster manages together, ' +
      'over several seconds, and its start lag grows with the job’s place in that line (p99 over 2 s). **Terms end ' +
      'while starts are due.** A term lasts 60 s however busy the hub, so four changes of leader fall inside the 4 ' +
      'minutes of jitter, often to another instance. Each new leader used to read every job’s state before its first ' +
      'turn, 200 reads in one second, which was the jittered peak (329 req/s, a fall of only 2.5–3.4×); the leader now ' +
      'hands its states over with their ETags (`src/engine/job-state-handoff.ts`) and the next reads only what ' +
      'changed. A start due during a change of leader still waits for the new leader’s first turn: that is the ' +
      'jittered max. **Two defects the benchmark found, fixed before these figures:** an occurrence that fell due ' +
      'while the leader’s pass over 200 jobs ran was left to the next periodic check (up to 5 s on an idle leader; ' +
      '8 s seen), and each pass redid croner’s date arithmetic for every job, and `defineJob` stepped 400 occurrences ' +
      'per jittered job (200 jobs: seconds of start-up); the planner now asks only for the first occurrence after ' +
      'the last check, which a schedule remembers. **Requests per run** are higher with jitter (about 46 against 25): ' +
      'the leader’s turns and the workers’ polls of four minutes are shared by the runs of that time.',
    more: (result) => {
      const scenarios = summaryList<{
        name: string;
        startupMs?: number;
        occurrences: {
          occurrence: string;
          afterRest: boolean;
          due: number;
          created: number;
          runs: { exact: number; inexact: number; unended: number };
          peakPerSecond: number;
          peakPerClockSecond: number;
          baselinePerSecond: number;
          requestsPerRun: number;
          startLagMs: { p50: number; p99: number; max: number };
          firstItemLagMs: { p99: number };
          termsBeganAtMs: number[];
        }[];
      }>(result, 'scenarios', (s) => typeof s.name === 'string' && Array.isArray(s.occurrences));
      if (scenarios.length === 0) return [];
      const fall = (result?.summary as { fall?: unknown } | undefined)?.fall;
      const ms = (v: number) => (Number.isFinite(v) ? formatNumber(v) : 'n/a');
      return [
        '**Every occurrence of the latest run** (peak: any 1 s / one clock second; baseline: requests per second with ' +
          'no run under way; runs = ended exact / ended not exact / not ended; terms: when a term began, ms after the ' +
          'occurrence, from 10 s before the window).',
        '',
        '| scenario | occurrence | start-up | peak req/s | baseline req/s | requests per run | created | runs | start lag p50 / p99 / max (ms) | first item p99 (ms) | terms began |',
        '|---|---|--:|--:|--:|--:|--:|---|---|--:|---|',
        ...scenarios.flatMap((s) =>
          s.occurrences.map(
            (o, k) =>
              `| ${s.name} | ${o.occurrence}${o.afterRest ? ' (after a rest)' : ''} | ` +
              `${k === 0 && s.startupMs !== undefined ? `${formatNumber(s.startupMs / 1000)} s` : ''} | ` +
              `${o.peakPerSecond} / ${o.peakPerClockSecond} | ${formatNumber(o.baselinePerSecond)} | ${ms(o.requestsPerRun)} | ` +
              `${o.created} / ${o.due} | ${o.runs.exact} / ${o.runs.inexact} / ${o.runs.unended} | ` +
              `${ms(o.startLagMs.p50)} / ${ms(o.startLagMs.p99)} / ${ms(o.startLagMs.max)} | ${ms(o.firstItemLagMs.p99)} | ` +
              `${o.termsBeganAtMs.length > 0 ? o.termsBeganAtMs.map((t) => formatNumber(t)).join(', ') : '—'} |`,
          ),
        ),
        '',
        ...(typeof fall === 'number' ? [`With jitter the peak fell ${formatNumber(fall)}× (goal ≥ 5×).`, ''] : []),
      ];
    },
  },
  footprint: {
    measures:
      "What Baton adds to a Functions app's deploy package and to its cold start; on Flex Consumption the package is " +
      'downloaded and loaded on every cold start. Two apps are built from scratch with production dependencies only, ' +
      'installed as a user installs (no lockfile, the registry’s versions of the day): ours registers one job with ' +
      '`registerBaton`, from the packed tarball of the checkout; the floor registers the same timer and queue trigger ' +
      'with `@azure/functions` and builds its storage clients with the two storage SDKs (and `@azure/identity`, which ' +
      'both load only for a keyless connection), at the versions Baton’s install resolved. The deploy package is the ' +
      'app’s folder zipped as a deploy zips it (each file deflated), sized exactly; cold start is a new `node` process ' +
      'to the line the app prints when its registrations are done, the two apps alternating, median of 31 each, on a ' +
      'connection string (Azurite’s, not contacted before the line). Each starts with a stand-in for what the host’s ' +
      'Node worker gives every app (`@azure/functions-core`), so registrations go where a deployed app’s go; without it ' +
      '`@azure/functions` falls into test mode and prints a warning as it does and one a registration, which no ' +
      'deployed app pays (three lines for the floor, eleven for Baton; about 4 ms of the difference). Goals: at most 30 ms more cold start than the ' +
      "floor (the table's row, written as a ratio) and at most 3 MB more zipped (under the result).",
    limits:
      '**Size.** The exporters (Azure Monitor, the OpenTelemetry SDK and its OTLP exporters) are optional peers an ' +
      'app installs when a setting names them; what every install carries beyond the floor is zod, Baton itself, ' +
      'the OpenTelemetry API and the small CLI and schedule packages (the largest are listed under the result). ' +
      '**Cold start.** The package ships its code bundled (`build/bundle.mjs`) with zod’s functional API ' +
      '(`zod/mini`), croner and semver compiled in: what an app loads at start in one file (`baton.js`, 0.33 MB, ' +
      'whitespace minified, its modules hoisted into one scope so V8 parses each once, no name-keeping wrappers); ' +
      'in files of their own, loaded when first used, the durable engine’s registrations, the HTTP API’s handlers ' +
      'and the coordinator (when the instance first leads: a follower, or an instance scaled out for queue load, ' +
      'never loads it; a leader pays about 2 ms once, on its first term); the CLI, the local host and the testing ' +
      'kit in another that an app never loads. It loads or builds what a start does not use only when it is used: ' +
      'the OpenTelemetry API (once a provider is registered), each queue’s client, the schemas of messages, records, ' +
      'the durable engine and of every setting or job option left unset, and croner’s runner until a schedule is ' +
      'asked for an instant. That took Baton’s share from about 120 ms to about 67, then 36–40, then 30–36, then ' +
      '20–26 (eight runs of this code, 31 starts of each app; of the last step about 4 ms is the worker’s stand-in, ' +
      'which the same harness gives the earlier code as 27–31). What is left, measured in one process on these ' +
      'machines (each a few ms either way from run to run): V8 compiling `baton.js` (about 8 ms) and running its ' +
      'top level (about 6 ms, much of it zod’s own code compiled and run for the first time by the job options’ and ' +
      'host.json’s schemas, which a start must check), `defineJob` (about 2.5 ms: the options and the schedule’s ' +
      'pattern) and `registerBaton` (about 12 ms against the floor’s 7: three storage clients where the floor ' +
      'builds two, since only the SDK reads a connection string and only by building a client; the elector, the ' +
      'lease and request stores, nine registrations). Not done: minified names (about 2 ms) would leave stack ' +
      'traces naming `t.lead` for `Coordinator.lead`. The Functions host’s own start (0.4–10 s on Flex) ' +
      'is not in either arm.',
    more: (result) => {
      const s = result?.summary as
        | {
            ours?: { zippedBytes: number; unzippedBytes: number; files: number; coldStartMs: number };
            floor?: { zippedBytes: number; unzippedBytes: number; files: number; coldStartMs: number };
            addedColdStartMs?: number;
            coldStartGoalMs?: number;
            addedZippedBytes?: number;
            zipGoalBytes?: number;
            addedPackages?: Array<{ package: string; zippedBytes: number }>;
          }
        | undefined;
      if (!s?.ours || !s.floor || s.addedColdStartMs === undefined) return [];
      const mb = (bytes: number) => `${formatNumber(bytes / 1e6)} MB`;
      const row = (name: string, a: { zippedBytes: number; unzippedBytes: number; files: number; coldStartMs: number }) =>
        `| ${name} | ${mb(a.zippedBytes)} | ${mb(a.unzippedBytes)} | ${a.files.toLocaleString('en-US')} | ${formatNumber(a.coldStartMs)} ms |`;
      const added = (s.addedPackages ?? [])
        .slice(0, 6)
        .map((p) => `\`${p.package}\` ${mb(p.zippedBytes)}`)
        .join(', ');
      return [
        '| app | zipped | unzipped | files | cold start (median) |',
        '|---|--:|--:|--:|--:|',
        row('ours', s.ours),
        row('floor', s.floor),
        '',
        `Baton adds ${formatNumber(s.addedColdStartMs)} ms of cold start (goal ≤ ${s.coldStartGoalMs ?? 30} ms: ` +
          `${s.addedColdStartMs <= (s.coldStartGoalMs ?? 30) ? 'met' : '**missed**'}) and ` +
          `${mb(s.addedZippedBytes ?? 0)} zipped (goal ≤ ${mb(s.zipGoalBytes ?? 3e6)}: ` +
          `${(s.addedZippedBytes ?? 0) <= (s.zipGoalBytes ?? 3e6) ? 'met' : '**missed**'}). Largest additions, zipped: ${added}.`,
      ];
    },
  },
  'idle-cost': {
    measures:
      'What an idle hub keeps executing, as Flex Consumption bills it (an instance is billed while an invocation ' +
      'runs). A local cluster of three real instance processes ticking every second, with one one-item job due every ' +
      "minute, runs for 300 s; each instance's local host sums how long its coordinator invocations took (its timer, " +
      'and tick messages on the work queue; one under way counts with the time it has run so far, read once a second, ' +
      'so a term open across an end of the window counts its part inside, to about a second), and the figure is their ' +
      'sum over all instances, as a share of wall time and as invocation-seconds per hour. The window starts once the ' +
      'lease has first rested: a leader that starts less than 30 s before an occurrence holds on until its run has ' +
      'ended, a start-up cost rather than an idle one. Two scenarios on fresh clusters: `resting`, the default, where an idle ' +
      'leader returns and leaves the lease resting until the next occurrence; and `held` ' +
      '(`BATON_REST_WHEN_IDLE=false`, over 60 s), where an idle leader holds each 60 s term, as before. The start lag ' +
      "of the job's runs in the resting window is reported beside it. The floor is the least a follower's tick can " +
      'cost: one read of the lease blob with the plain SDK, timed in the same run on the same Azurite, once a second ' +
      'per instance. The goal is absolute (≤ 3 % of wall time), written as a ratio to the floor.',
    limits:
      '**What is left is ticks and runs.** While the lease rests, a tick is one lease read and returns; the leader is ' +
      'back for each occurrence (on the tick at its own instant, half a second ahead at most) and leaves once its run ' +
      "has ended, so each minute costs about one run's leadership: plan, dispatch, a worker's poll and the fold. " +
      "**Local figures only.** A Functions host adds its own overhead to every invocation, and on Azure one instance's " +
      'timer fires per tick (the host holds a lock), every 10 s by default: there, ticks cost less and runs more.',
    more: (result) => {
      const scenarios = summaryList<{
        name: string;
        windowMs: number;
        invocations: number;
        invocationMs: number;
        share: number;
        invocationSecondsPerHour: number;
        requestsPerTickPerInstance: number;
        terms: number;
        startLagMs: number[];
      }>(result, 'scenarios', (s) => typeof s.name === 'string' && typeof s.share === 'number');
      if (scenarios.length === 0) return [];
      const lags = (values: number[]) => (values.length > 0 ? values.map((v) => formatNumber(v)).join(', ') : '—');
      return [
        '**Every scenario of the latest run** (coordinator invocations summed over the three instances).',
        '',
        '| scenario | window | invocations | invocation time | share of wall | invocation-s per hour | terms | requests per tick per instance | start lags (ms) |',
        '|---|---|---|---|---|---|---|---|---|',
        ...scenarios.map(
          (s) =>
            `| ${s.name} | ${s.windowMs / 1000} s | ${s.invocations} | ${formatNumber(s.invocationMs / 1000)} s | ` +
            `${formatNumber(s.share * 100)} % | ${formatNumber(s.invocationSecondsPerHour)} | ${s.terms} | ` +
            `${formatNumber(s.requestsPerTickPerInstance)} | ${lags(s.startLagMs)} |`,
        ),
        '',
      ];
    },
  },
  stragglers: {
    measures:
      'Whether one instance that stops answering, or a few slow or failing items, decides how long a run takes. The ' +
      'figure is the makespan: a run record created → ended, its output written first. A local cluster of three real ' +
      'instance processes runs 1,500 items of 400 ms, one item per message, with the local host’s message visibility ' +
      'set to the Functions host’s 10 minutes (`BATON_LOCAL_VISIBILITY_SECONDS=600`), so a message an instance holds ' +
      'comes back to the queue only after 600 s, as on Azure. Each scenario runs on a fresh cluster after a warm-up ' +
      'run, right after a clean run of the same job on that cluster, which is its floor: **kill**, once half the items ' +
      'are counted a follower (not the leader) that holds work messages of the run gets SIGKILL, and a replacement ' +
      'starts once it has exited; **pause**, the same with SIGSTOP, and SIGCONT 60 s later, or once the run has ' +
      'ended if sooner (nothing the victim does after the end can change the makespan); **slow**, every 100th item ' +
      '(1 %) takes 10 × as long; **failing**, every 100th item throws on every try, and the job tolerates exactly ' +
      'those. Whether the victim holds messages is read from its own telemetry: every instance reports each ' +
      'second its worker invocations so far, those under way included, and a `worked` event as each message’s ' +
      'handler returns; the invocations since the run began minus the `worked` events are the messages in its hands. ' +
      'A batch received together ends together, perhaps in the moment between a report and the signal, so the ' +
      'signal goes to a follower whose report shows work of the run 40–150 ms after a burst of its `worked` events ' +
      'ended, when its queue trigger has just taken the next batch, which runs for a whole item, or as soon as its ' +
      'own per-message events (`BATON_CHAOS_REPORT_WORK`) show it took up a message less than half an item ago. ' +
      'The run proves it: ' +
      'only a copy gets a held item done before its 600 s, so a run that needed no copy was struck while the victim ' +
      'held nothing uncounted, and the pair is redone. The messages still hidden in the queue after the run (read ' +
      'with none visible, before SIGCONT for a pause) are what the victim had received and not deleted. Goals (issue 32): kill and pause ≤ 1.3 × clean, slow ≤ 1.5 ×, ' +
      'failing ≤ 1.5 × clean + the job’s retry schedule (the sum of the delays between its tries); in each, the ' +
      'output exact (the synthetic fingerprint of count, sum and sum of squares catches an item counted twice or ' +
      'missed, and the failing run’s manifest must list exactly its failing items) and the hedged copies within the ' +
      'job’s bound. The headline is the scenario furthest from its goal; every goal is listed under the latest ' +
      'result. `BENCH_STRAGGLERS_SCENARIOS` picks scenarios (comma-separated), `BENCH_STRAGGLERS_ROUNDS` repeats the ' +
      'pairs (each scenario then reports its round with the median ratio).',
    limits:
      '**The hedge wait.** Nothing but hedged dispatch gets a held message done before its 600 s: the leader copies a ' +
      'message once it has waited 4 × the p90 of the run’s message durations since a message sent after it was ' +
      'counted, never less than the job’s `hedge.minWaitSeconds` (5 s by default). At 400 ms items 4 × p90 is about ' +
      '2 s, so the 5 s floor rules: the victim’s messages are copied together a little over 5 s after the fault (the ' +
      'floor counts from when a later message is counted, then the leader’s next pass), and each copy joins the back ' +
      'of the queue, behind at most the in-flight window (`BATON_MAX_IN_FLIGHT`, 256 on the local cluster). Before ' +
      '5 messages have reported a duration the wait is `processSeconds` + `graceSeconds` (130 s by default), which ' +
      'only a fault in the first seconds of a run would meet. **The lost worker.** Struck at half way, the copies are ' +
      'done well before the end, and what the fault costs is mostly the victim’s 16 worker slots: until its ' +
      'replacement polls (kill, a few seconds here; on Azure a new instance takes longer, but the copies do not wait ' +
      'for it) or for the rest of the run (pause). The pace falls by less than a third, since the cluster is held as ' +
      'much by the two cores Azurite and every instance share as by its 3 × 16 slots; each fault’s pace before and ' +
      'after it is in the results. A fault in the last seconds of a run would add the whole wait and a copy’s ' +
      'processing to the makespan, a quarter of a 20 s run for the 5 s floor alone: not measured here. **The ' +
      'bound.** A run sends at most 5 % of its messages as copies (`hedge.maxPercent`, 75 of this run’s 1,500) or ' +
      '`hedge.minCopies` (24), whichever is more: an instance can hold up to host.json’s `batchSize` + ' +
      '`newBatchThreshold` (24) messages, so one victim’s whole batch can be copied in a run of any size; two ' +
      'victims at once in a small run could hold more than the bound. **Slow items** of 4 s stay under the 5 s ' +
      'floor and are never copied; they cost their slots and the time of the last of them (the run’s last item is ' +
      'one). **A paused victim** resumes into a run that has ended; what it sends then changes nothing. **Failing ' +
      'items** are tried again by the worker, not the queue: the job’s `retry: { attempts: 3, delaySeconds: 1 }` ' +
      'sends each failed item back to the queue hidden for 1 s, then 2 s, and the result tells the leader when the ' +
      'next try is due, so it spends no copy on a message that is only waiting for its try. **Noise.** Azurite runs in process on the same two cores as the instances, and the machine is shared: ' +
      'a run’s pace moves by a third from one minute to the next, more than the goals’ margins. Hence a clean run ' +
      'beside each scenario, three rounds, and the median; every round’s ratio is listed below.',
    more: (result) => {
      const scenarios = summaryList<{
        name: string;
        makespanSeconds: number;
        ratio: number;
        hedges: number;
        hedgeBound: number;
        exact: boolean;
        counters: { duplicates: number };
        clean: { makespanSeconds: number; hedges: number; exact: boolean };
        fault?: {
          signal: string;
          atMs: number;
          heldAtSignal: number;
          hiddenAfterRun: number | null;
          replacement?: { startedAtMs: number };
          resumedAtMs?: number;
        };
      }>(result, 'scenarios', (s) => typeof s.name === 'string' && typeof s.makespanSeconds === 'number');
      if (scenarios.length === 0) return [];
      const seconds = (ms: number) => `${formatNumber(ms / 1000)} s`;
      const fault = (f: NonNullable<(typeof scenarios)[number]['fault']>) =>
        `${f.signal} at ${seconds(f.atMs)}, holding ${f.heldAtSignal} at its last report, ${f.hiddenAfterRun ?? 'n/a'} left hidden` +
        (f.replacement !== undefined ? `; replacement up at ${seconds(f.replacement.startedAtMs)}` : '') +
        (f.resumedAtMs !== undefined ? `; SIGCONT at ${seconds(f.resumedAtMs)}` : '');
      const schedule = (result?.summary as { retrySchedule?: { totalSeconds?: unknown; source?: unknown } } | undefined)
        ?.retrySchedule;
      const failing = scenarios.some((s) => s.name === 'failing');
      const pairs = summaryList<{ scenario: string; ratio: number }>(
        result,
        'pairs',
        (p) => typeof p.scenario === 'string' && typeof p.ratio === 'number',
      );
      const rounds = scenarios
        .map((s) => s.name)
        .filter((n) => pairs.some((p) => p.scenario === n))
        .map(
          (n) =>
            `${n} ${pairs
              .filter((p) => p.scenario === n)
              .map((p) => p.ratio.toFixed(3))
              .join(', ')}`,
        );
      return [
        '**Every scenario of the latest run** (times from the run record’s creation; copies are the hedged copies ' +
          'the run sent, against its bound).',
        '',
        '| scenario | makespan | clean run before it | ratio | copies (bound) | duplicates | output | fault |',
        '|---|--:|--:|--:|--:|--:|---|---|',
        ...scenarios.map(
          (s) =>
            `| ${s.name} | ${formatNumber(s.makespanSeconds)} s | ${formatNumber(s.clean.makespanSeconds)} s | ` +
            `${s.ratio.toFixed(3)} | ${s.hedges} (${s.hedgeBound}) | ${s.counters.duplicates} | ` +
            `${s.exact && s.clean.exact ? 'exact' : '**not exact**'} | ${s.fault ? fault(s.fault) : '—'} |`,
        ),
        '',
        ...(rounds.length > 0
          ? [`**Every round** (each pair's ratio; the table shows the median round): ${rounds.join('; ')}.`, '']
          : []),
        failing
          ? `The failing run's retry schedule: ${String(schedule?.totalSeconds)} s (${String(schedule?.source)}).`
          : 'The failing scenario is not in the latest run (`BENCH_STRAGGLERS_SCENARIOS` left it out).',
        '',
      ];
    },
  },
  throughput: {
    measures:
      'Items per second through a whole run of N = 2,000 items with a trivial `process`, one item per message, on a local ' +
      'cluster of three real instance processes: from the run record being created to the run ending with its output ' +
      'written (plan, dispatch, workers, results folded and checkpointed by the leader, finalize). The floor moves the ' +
      'same messages with the raw SDK on the same Azurite at the same total concurrency (three consumers receiving 16 at ' +
      'a time, 16 send lanes, one results drainer): send the work, receive it, send a result and delete the work, ' +
      'receive and delete the results, all at once. It runs in the shape of the cluster: three processes, one per ' +
      'consumer, the sender and drainer sharing the first (as the leader shares its instance), every consumer polling ' +
      'before the clock starts. The same floor with all three consumers in one process is measured in the same rounds ' +
      'and reported as `oneProcessFloor`. The same job with `itemsPerMessage` 50 is in the results. The chart below ' +
      'plots both arms over time (items/s over a trailing second).',
    limits:
      "**Two cores.** The cluster's Azurite runs in one Node thread, on the same two cores as every client process, and " +
      'every item at one item per message costs a work and a result message, each sent, received and deleted. Both ' +
      'arms are bound by CPU: Azurite plus the clients. Profiled at 4 shards, the instances spent 95–97% of their busy ' +
      "time in the Azure SDK's pipeline (signing, tracing, XML parsing), Node's HTTP stack and garbage collection, and " +
      "3–5% in Baton's own code; spread over three processes the same requests cost about twice the client CPU they " +
      'cost in one process, and that CPU is taken from Azurite. So the one-process floor is faster than any shape with ' +
      'an instance per worker, raw SDK or not, and the goal compares Baton with the raw SDK in its own shape. ' +
      '**Start-up.** Each queue trigger backs off while its queue is empty, as the Functions host does (up to ' +
      "`maxPollingInterval`, 2 s), so a run's first work messages wait for the triggers to wake; the floor's consumers " +
      'poll every 20 ms and never wait. At 2,000 items that is a large part of the run and most of the round-to-round ' +
      'spread of ours. **Azurite.** Its receive slows as a queue grows; the floor sends all its work at once and pays ' +
      "that slope, while Baton's leader keeps at most `BATON_MAX_IN_FLIGHT` messages of a run uncounted (256 on the " +
      'local cluster). The Azurite of `startAzurite` replaces two of its batch removals that re-sorted every index of ' +
      'the store on each call (see `src/local/azurite.ts`); before, they froze the process for seconds under load. ' +
      '`itemsPerMessage` divides the message traffic. Against real Azure Storage the limits are the queue scale ' +
      'targets and the function host instead.',
  },
  'sharded-throughput': {
    measures:
      'Whether Baton keeps up with the raw SDK when a hub spreads its queues over shards (`BATON_QUEUE_SHARDS`): the ' +
      "throughput benchmark's run (N = 8,000 items, one item per message, three instance processes, from the run record " +
      'being created to the run ending with its output written) with 1, 2 and 4 shards, each on a fresh cluster and ' +
      'Azurite, after a warm-up run, the floors and ours alternating for three rounds (the median round of each). The ' +
      'floor is the throughput floor, in the same three-process shape, on as many queue pairs: the sender sends round ' +
      'robin over the S work queues, each of the three consumers runs one receive loop per work queue (as each instance ' +
      "runs one queue trigger per shard) and sends each result to its shard's results queue, and one drainer receives " +
      'every results queue at once. At one shard it is the throughput floor exactly. The same floor with every consumer ' +
      'in one process is measured in the same rounds and reported per shard count (`oneProcessFloor`). The headline is ' +
      'the worst of the three ratios; every shard count is listed with its goal (≥ 0.8) under the latest result, and ' +
      "the arithmetic below turns the measured requests per item into what Azure's published targets allow.",
    limits:
      '**Azurite and two cores.** All the queues live in the one Azurite process, on the same two cores as the ' +
      'instances, so shards add no storage capacity here: the figure says how close Baton stays to the raw SDK on the ' +
      'same number of queues (on Azure each queue has its own target; see below). Both arms are bound by CPU, as in the ' +
      'throughput benchmark: the client processes and Azurite share two cores, so the one-process floor, which spends ' +
      'about half the client CPU per request, leaves Azurite more and runs faster than either three-process arm. One ' +
      'store holds the messages of every queue, so splitting them over more queues saves Azurite little work either. ' +
      '**Start-up.** The queue triggers wake from their idle back-off (up to ' +
      '2 s) after the first dispatch; the floors poll every 20 ms. That wait is why N is 8,000 here: at 2,000 items a ' +
      'run takes about 4 s on this Azurite, and where in the back-off the triggers happen to be moved ours by a third ' +
      'from round to round. **Noise.** From round to round the machine’s other ' +
      'work moves each arm more than the gaps between shard counts, hence three rounds and their medians. ' +
      '**Requests.** An idle shard still costs: every instance polls each shard’s work queue and the leader receives ' +
      'every results queue on each pass (and every poison queue once a second while results flow), so requests per ' +
      'item grow a little with S.',
    more: queueShardsOnAzure,
  },
  transactions: {
    measures:
      'Storage requests: what a run and an idle cluster cost, since Azure Storage bills per operation. Every storage ' +
      'request from every instance is counted by operation with a pipeline policy that the client factory adds to ' +
      'every client (`src/storage/request-counter.ts`), and the benchmark sums the counts over the processes. Per item: ' +
      "the throughput run's requests divided by its items, against the floor's requests per item counted the same way " +
      "(goal ≤ 4.5, written as a ratio to the floor). Per idle tick: each instance's requests over a window with no run " +
      'open, divided by the ticks in it (goal ≤ 2 per tick per instance; the per-second figure is in the results).',
    limits:
      '**Per message:** a work and a result message, each sent, received (in batches) and deleted: just over 4 per item, ' +
      'the floor. `itemsPerMessage` divides it. **Per run:** plan chunks, run-record checkpoints, lease renewals and ' +
      "the polls of the leader's drains while the run is open. **Idle:** a follower reads the lease once per tick and " +
      'the queue trigger polls the work queue once per `maxPollingInterval` (2 s); the leader renews every 5 s, lists ' +
      'requests every 5 s, reads job states once per term and drains its queues every 30 s. Since handovers and tick ' +
      'messages, the leader also reads the handover request once a tick and moves its tick beacon at each renewal ' +
      '(1.30 per tick before, 1.74 after, on a 1 s tick). Per tick depends on the ' +
      'tick: a 1 s tick halves the per-tick figure of a 2 s tick but costs more per second. An operation the SDK ' +
      'retries counts once (the count is taken before the retry policy).',
  },
  'leader-memory': {
    measures:
      "Whether the leader's memory grows with the size of a run: the leader process's peak live heap (the heap still in " +
      'use after a forced full collection, sampled every 500 ms) during a run of 100,000 items (ours) against a run of ' +
      '10,000 (the floor), each on a fresh one-instance cluster and a fresh Azurite so no peak carries over, both ' +
      'packing 100 items per message so only the aggregation state scales. Peak heap used, peak RSS, the rise over the ' +
      'idle baseline and the checkpoint size are in the results, each with its ratio.',
    limits:
      '**What the leader holds per run:** the accumulator (its size is the job’s choice) and a bitset of counted item ' +
      'indexes, N/8 bytes in memory, written into every checkpoint as the lengths of its runs of uncounted and counted items. The plan is streamed to storage in chunks and results ' +
      'are folded as they arrive, so neither is held. Peak heap used and peak RSS miss the goal, and the cause is ' +
      'garbage, not retained state: V8 lets old-space garbage pile up to a limit before a full collection, and the ' +
      '100k run lasts long enough to reach it while the 10k run does not (about 22–26 MiB live after every full ' +
      'collection of the 100k run; 300,000 items peak at 116 MiB heap used against 96 MiB at 100,000, so it levels ' +
      "off). The leader deletes drained messages 32 at a time: all of a checkpoint's deletes at once would open " +
      'about 150 sockets and raise both peaks.',
  },
  scale: {
    measures:
      'Whether the cost of an item stays flat as a run grows: synthetic runs of 10,000, 100,000 and 1,000,000 items, ' +
      '100 items per message, each on a fresh local cluster of three instance processes and a fresh Azurite. For each ' +
      'size: the request body bytes all instances sent to storage per item (blob uploads and queue messages, counted ' +
      'by the same counter as the requests), storage requests per item, the leader’s peak live heap (the ' +
      'leader-memory probe, preloaded into every instance), the run’s wall time and items/s, and whether the output ' +
      'is exact. The goals are ratios within the run: bytes per item at 1M ≤ 1.5 × at 10k (the headline in the ' +
      'table, ours = 1M, floor = 10k), requests per item ≤ 1.1 ×, peak live heap ≤ 1.5 ×, and items/s at 1M ≥ 0.8 × ' +
      'at 100k; every goal is listed under the latest result. Opt-in, `BENCH_SCALE_ONE_PER_MESSAGE=1` adds 1,000,000 ' +
      'items at 1 item per message on a fresh cluster, under the same time limit (`BENCH_SCALE_TIMEOUT_MS`, 15 ' +
      'minutes): outside the goals, it is listed under the latest result finished or with how far it got (items ' +
      'counted, items/s, bytes and requests per item so far, and whether its last checkpoint folds each counted item ' +
      'once; a run has no output to check until it ends).',
    limits:
      '**What grows with a run:** the dedupe checkpoint is written as the lengths of runs of uncounted and counted ' +
      'items, so while items are counted mostly in order it stays small at any size; the leader holds N/8 bytes of ' +
      'bitset in memory (125 KB at 1M). Most of the bytes are the work and result messages, whose JSON grows only ' +
      'with the digits of the item indexes, then the plan chunks. Per-run fixed costs (planning, the run record, idle polling of three ' +
      'instances) weigh more per item on a small run, so the small size is the harder floor for the per-item ' +
      'ratios. **Azurite** in one Node thread on two shared cores bounds the rate; the probe’s forced collections ' +
      'cost every size alike. Bytes count what the client sends, the XML envelope of queue messages ' +
      'included, not what Azure bills as stored capacity. **At 1 item per message** every item is a work message ' +
      'and a result message of its own, each sent, received and deleted: Azurite’s receive and delete rate (a few ' +
      'hundred messages/s on two cores, falling as a queue grows) holds the run to little more than a hundred ' +
      'items/s, so 1M items take about two hours and the 15-minute limit ends the run at about an eighth of them.',
  },
  dispatch: {
    measures:
      "The leader's enqueue rate: `dispatchSlice` taking a planned run to `running` (read the plan chunks, encode the " +
      'work messages, send them, checkpoint the cursor), against a plain parallel `QueueClient.sendMessage` of the ' +
      'same message texts at the same concurrency, on the same in-process Azurite, each arm on a fresh queue, ' +
      'alternating floor and ours.',
    limits:
      "**Azurite's send rate**, about 0.9–1.1k messages/s at concurrency 16, bounds both arms. On top of the sends the " +
      'dispatcher reads the plan in chunks of 1,000 items, checkpoints the cursor about once a second, and sends in ' +
      'windows of concurrency × 4 with a barrier between windows, so a slow send holds up the next window; the ' +
      "diagnostic `windowed` arm in the results measures that pattern without the dispatcher's reads and encoding.",
  },
  history: {
    measures:
      'What one page of runs costs as a hub grows old: two hubs on the same in-process Azurite, of 100 runs (the ' +
      'floor) and of 10,000 (ours), made directly in storage as the leader makes them (index entries, then the record), ' +
      'one a minute over two jobs. On each, the page the status page polls (`GET /api/baton/runs?limit=20`, the ' +
      "route's handler in the benchmark's process) is read in 101 rounds that alternate the hubs: the median latency is the headline, and the " +
      "storage requests per page, counted by the client factory's counter, are in the results with the next page's. " +
      'Then `baton runs --limit 20 --json` runs as a process against a proxy that counts what reaches storage. Goal: ' +
      'the page at 10,000 within 1.2 × the page at 100, in latency and in requests.',
    limits:
      '**Requests:** one listing of the run index and one read per run on the page, at any size (a page is 21 ' +
      'requests). **Latency:** Azurite answers a prefix listing by matching its regex against every blob it holds ' +
      'and sorting all that match before it cuts a page (its Loki store cannot use its name index for a prefix), so ' +
      "the listing grows with the hub's history on Azurite; Azure lists by name from an index. The results show it " +
      'with the same 21 requests made with the SDK alone at each size, split into the listing and the 20 reads: the ' +
      "reads cost about the same at both sizes, the listing does not. Over four runs on one machine the page's ratio " +
      "was 1.19 to 1.35 and the raw requests' 1.05 to 1.35, the page staying within a few percent of the raw " +
      "requests at each size: what grows is Azurite's listing. The CLI's time is mostly a Node process starting.",
  },
};

/** Azure's published scale targets: not measured here, cited where they are used. */
const AZURE = {
  queueMessagesPerSecond: 2_000,
  accountRequestsPerSecond: 20_000,
  queueTargets: 'https://learn.microsoft.com/azure/storage/queues/scalability-targets',
  accountTargets: 'https://learn.microsoft.com/azure/storage/common/scalability-targets-standard-account',
};

interface ShardFigures {
  shards: number;
  requestsPerItem: { ours: number };
  queueRequestsPerItem: { ours: number };
}

/**
 * What shards allow on Azure, from the targets and the requests per item this benchmark measured:
 * S queues take 2,000 × S messages/s, the account 20,000 requests/s, so a hub goes no faster than
 * the lower of the two, and past the shard count where the account is the lower, more do not help.
 */
function queueShardsOnAzure(result: BenchResult | undefined): string[] {
  const { queueMessagesPerSecond: perQueue, accountRequestsPerSecond: perAccount } = AZURE;
  const out = [
    '### Queue shards on Azure',
    '',
    `Azure's published targets, not measured here: one queue takes up to ${formatNumber(perQueue)} messages per ` +
      `second of 1 KiB ([Scalability and performance targets for Queue Storage](${AZURE.queueTargets})), and a ` +
      `standard general-purpose v2 account ${formatNumber(perAccount)} requests per second ([Scalability and ` +
      `performance targets for standard storage accounts](${AZURE.accountTargets}); its current version gives 40,000 ` +
      'for a list of large regions, and the Queue Storage page gives the account as 20,000 messages per second of ' +
      '1 KiB). ' +
      'Past a target Storage answers 503 (Server Busy) or 500 (Operation Timeout).',
    '',
    "At one item per message every item puts one message on its shard's work queue and one on its results queue, " +
      'and each message is sent, received (in batches) and deleted. For one hub on Azure:',
    '',
    `- **S shards' queues** carry at most ${formatNumber(perQueue)} × S items/s, reading the target as messages ` +
      `put on a queue; reading it as every request on a queue (a send, a delete and a share of a batched receive, ` +
      `about half the queue requests per item below on each of the two queues), ${formatNumber(perQueue)} × S ÷ that.`,
    `- **The account** carries at most ${formatNumber(perAccount)} ÷ (requests per item) items/s, however many ` +
      'shards: every request of every instance counts (queues, run records, plan chunks, the lease), and so does ' +
      "anything else on the account, such as the Functions host's own use of `AzureWebJobsStorage` or other hubs.",
    '- **`itemsPerMessage` k > 1** divides the messages per item, and the queue requests with them, by k: the queues’ ' +
      'cap rises k-fold, the account’s less, as the run’s other requests (run records, plan chunks, the lease, idle ' +
      'polls) stay; a hub then needs fewer shards. The throughput benchmark measures k = 50.',
  ];
  const rows = summaryList<ShardFigures>(
    result,
    'perShards',
    (r) =>
      typeof r.shards === 'number' &&
      typeof (r.requestsPerItem as { ours?: unknown } | undefined)?.ours === 'number' &&
      typeof (r.queueRequestsPerItem as { ours?: unknown } | undefined)?.ours === 'number',
  );
  if (rows.length === 0) {
    out.push('', 'The requests per item these caps divide by appear here after `npm run bench -- sharded-throughput`.');
    return out;
  }
  const cells = rows.map((r) => {
    const perQueueRequests = r.queueRequestsPerItem.ours / 2;
    return [
      String(r.shards),
      r.requestsPerItem.ours.toFixed(2),
      r.queueRequestsPerItem.ours.toFixed(2),
      `${formatNumber(perQueue * r.shards)} (${formatNumber((perQueue * r.shards) / perQueueRequests)})`,
      formatNumber(perAccount / r.requestsPerItem.ours),
    ];
  });
  // The most shards measured cost the most requests per item: the account's cap from them.
  const most = rows.reduce((a, b) => (b.shards > a.shards ? b : a));
  const accountCap = perAccount / most.requestsPerItem.ours;
  const enough = Math.ceil(accountCap / perQueue);
  const enoughPerRequest = Math.ceil(accountCap / (perQueue / (most.queueRequestsPerItem.ours / 2)));
  out.push(
    '',
    "Baton's requests per item in the latest run, all instances together, are measured here; the caps are the " +
      'targets above divided by them, the queues’ read per message and, in brackets, per request:',
    '',
    '| shards | requests per item | queue requests per item | cap of the queues on Azure, items/s | cap of the account on Azure, items/s |',
    '|--:|--:|--:|--:|--:|',
    ...cells.map((c) => `| ${c.join(' | ')} |`),
    '',
    `So a hub at one item per message is held by its queues up to a few shards and by the account past them: at ` +
      `${most.requestsPerItem.ours.toFixed(2)} requests per item (${most.shards} shards) the account takes about ` +
      `${formatNumber(accountCap)} items/s, which the queues of ${enough} shards already carry (${enoughPerRequest} ` +
      'reading the target per request). More shards than that do not make a hub faster within one account; pack ' +
      'more items per message, or put the work on another account. These are storage’s caps only: one leader still ' +
      'sends and drains all of a hub’s messages (see above), and how fast it does that against Azure is not measured ' +
      'here.',
  );
  return out;
}
