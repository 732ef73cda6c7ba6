import { runKeys } from '../../src/hub/run-record';
import type { SyntheticJobSpec } from '../../functions/synthetic-job';
import { probeEnv, readProbe, type ProbeLine } from '../lib/live-heap-probe';
import { BenchCluster, type BenchInstance, type TimedEvent } from '../lib/bench-cluster';
import { inexactness } from '../lib/synthetic-runs';
import { sideBySide } from '../lib/side-by-side';
import { median, report, type BenchOptions, type BenchResult } from '../lib/report';

/**
 * leader-memory: does the leader's memory grow with the size of a run? A synthetic run of SMALL
 * items (the floor) and one of LARGE items (ours), itemsPerMessage 100 for both so that only
 * the aggregation state scales, not the size of a message. Every run gets a fresh cluster (fresh
 * in-process Azurite, fresh instance processes) so no peak is carried over: the OS's peak RSS
 * never goes down. The run's output and counters are checked against the known answer.
 *
 * Each size runs in two arms, on separate processes:
 * - plain: the instance as shipped. Its own reports give the peak heap used and peak RSS since
 *   it started, read after the run, and the idle baseline just before the trigger.
 * - probe: the same, with bench/lib/memory-probe.cjs preloaded, which forces a full collection
 *   every PROBE_MS (less often on a machine where that would take over a tenth of its time) and
 *   reports the heap still live after it. The largest during the run is the peak live heap:
 *   what the process actually holds at its fullest.
 *
 * The headline is the peak live heap. Peak heap used counts garbage not yet collected, and
 * V8 lets old-space garbage pile up to a limit it sets from the live heap: a run that lasts
 * longer (more messages) reaches that limit and a short one does not, so peak heap used grows
 * with the run's duration even when nothing is retained (seen with --trace-gc: ~22 MiB after
 * each mark-compact, 70+ MiB between them on the large run). Peak RSS adds the allocator's and
 * V8's reserve on top. Both are reported, with their ratios.
 *
 * One instance by default: it leads from the start, and the figures are the whole process, its
 * own worker included (a worker holds one batch of messages, the same for both sizes).
 *
 * A smoke run (which checks that both arms work, not what they measure) runs each arm on one
 * cluster, the two side by side: the small run, then the large one at once, its baseline the
 * leader's report right after the small run.
 */
export const name = 'leader-memory';

const GOAL = { ratio: 1.25, direction: 'atMost' as const };
const ITEMS_PER_MESSAGE = 100;
const INSTANCES = Number(process.env.BENCH_MEMORY_INSTANCES ?? 1);
const PROBE_MS = Number(process.env.BENCH_MEMORY_PROBE_MS ?? 500);
const VERBOSE = process.env.BENCH_VERBOSE === '1';
/**
 * How long the leader idles after acquiring before its baseline is read. Short on purpose: an
 * idle leader backs off its polling (up to 5 s between looks at requests), so a long settle
 * costs seconds of trigger latency on every cluster.
 */
const SETTLE_MS = 1000;
const MiB = 1024 * 1024;

type MemoryEvent = Extract<TimedEvent, { kind: 'memory' }>;
type Arm = 'plain' | 'probe';
interface Sample {
  arm: Arm;
  items: number;
  trial: number;
  messages: number;
  /** Bytes of the run record document (the checkpoint), and of its two checkpoint fields as JSON. */
  checkpointBytes: number;
  seenBytes: number;
  accBytes: number;
  /** Trigger to terminal state, ms. */
  runMs: number;
  wallMs: number;
  /** plain: the leader's peaks since its start, read after the run; its idle baseline before the trigger. */
  peakHeapUsed?: number;
  peakRss?: number;
  baselineHeapUsed?: number;
  baselineRss?: number;
  /** The largest of the once-a-second reports during the run (coarser than the peaks). */
  runMaxHeapUsed?: number;
  runMaxRss?: number;
  /** probe: the largest live heap during the run, the last before the trigger, and the probe's collections. */
  peakLiveHeap?: number;
  baselineLiveHeap?: number;
  liveSamples?: number;
  meanGcMs?: number;
}

function memoryEvents(instance: BenchInstance, from: number, to = Number.POSITIVE_INFINITY): MemoryEvent[] {
  return instance.events.filter((e): e is MemoryEvent => e.kind === 'memory' && e.at >= from && e.at <= to);
}

/**
 * A fresh cluster (Azurite and instances) for `arm`, with a job for each size (`memory`, or
 * `memory-<items>` when one cluster runs more than one size, as a smoke run's does), and each
 * instance's probe lines.
 */
async function startCluster(arm: Arm, sizes: readonly number[]): Promise<Started> {
  const specs = new Map(
    sizes.map((items): [number, SyntheticJobSpec] => [
      items,
      { name: sizes.length > 1 ? `memory-${items}` : 'memory', items, itemsPerMessage: ITEMS_PER_MESSAGE },
    ]),
  );
  const cluster = await BenchCluster.start({
    instances: INSTANCES,
    jobs: [...specs.values()],
    ...(arm === 'probe' ? { env: probeEnv(PROBE_MS) } : {}),
  });
  return { cluster, specs, probes: new Map(cluster.instances.map((i) => [i, arm === 'probe' ? readProbe(i) : []])) };
}

interface Started {
  cluster: BenchCluster;
  specs: Map<number, SyntheticJobSpec>;
  probes: Map<BenchInstance, ProbeLine[]>;
}

/** One run of `items` on a fresh cluster, stopped after it. */
async function measure(items: number, trial: number, arm: Arm): Promise<Sample> {
  const wall0 = performance.now();
  const started = await startCluster(arm, [items]);
  try {
    return (await measureOn(started, items, trial, arm)).sample;
  } finally {
    await started.cluster.stop();
    if (VERBOSE)
      console.error(
        `  (${arm} ${items} items, trial ${trial}: cluster up and down in ${Math.round(performance.now() - wall0)} ms)`,
      );
  }
}

/**
 * One run of `items` on `cluster`, whose arm is `arm`; and the leader's first memory report after
 * it. With `after`, that report of a run just before on the same cluster (a smoke run's), the
 * next run is triggered at once, with it for the idle baseline: an idle leader looks at its
 * requests less and less often (every 5 s at last), so a trigger right after a run is taken up
 * sooner than one after the usual settle.
 */
async function measureOn(
  { cluster, specs, probes }: Started,
  items: number,
  trial: number,
  arm: Arm,
  after?: MemoryEvent,
): Promise<{ sample: Sample; after: MemoryEvent }> {
  const spec = specs.get(items) as SyntheticJobSpec;
  const leader = await cluster.waitFor(() => cluster.leader(), 60_000, 'a leader');
  const live = probes.get(leader) as ProbeLine[];
  let base = after;
  if (!base) {
    const acquired = cluster.acquiredSince(0)?.at ?? Date.now();
    // Baseline: the leader idle, start-up settled, in a report made after the settling time.
    await new Promise((r) => setTimeout(r, Math.max(0, acquired + SETTLE_MS - Date.now())));
    const settled = Date.now();
    base = await cluster.waitFor(() => memoryEvents(leader, settled).at(0), 10_000, 'a baseline memory report');
    if (arm === 'probe') await cluster.waitFor(() => live.find((p) => p.at >= settled), 10_000, 'a baseline probe line');
  }

  const triggered = Date.now();
  const runId = await cluster.trigger(spec.name);
  const details = await cluster.waitForRun(runId, items >= 50_000 ? 180_000 : 90_000);
  const ended = Date.now();
  // The peaks are sampled every 200 ms and reported every second: one report after the end has them all.
  const last = await cluster.waitFor(() => memoryEvents(leader, ended).at(0), 10_000, 'a memory report after the run');

  // The run is what we meant it to be: the right answer, every item once, one leader throughout.
  const { record } = details;
  const wrong = inexactness(spec, details);
  if (wrong.length > 0) throw new Error(`run ${runId} is not exact: ${wrong.join('; ')}`);
  // A new term of the same instance is fine (terms are bounded); another instance leading is not.
  if (cluster.leader() !== leader || cluster.acquiredSince(triggered, leader)) {
    throw new Error(`the leader changed during run ${runId}: its figures would not be one leader's`);
  }

  const stored = await cluster.docs.read(runKeys.record(runId));
  if (!stored) throw new Error(`run record of ${runId} is missing`);
  const sample: Sample = {
    arm,
    items,
    trial,
    messages: record.messages,
    checkpointBytes: Buffer.byteLength(stored.body),
    seenBytes: Buffer.byteLength(JSON.stringify(record.seen)),
    accBytes: Buffer.byteLength(JSON.stringify(record.acc)),
    runMs: ended - triggered,
    wallMs: 0,
  };
  if (arm === 'plain') {
    const during = memoryEvents(leader, triggered, ended);
    Object.assign(sample, {
      peakHeapUsed: last.peakHeapUsed,
      peakRss: last.peakRss,
      baselineHeapUsed: base.heapUsed,
      baselineRss: base.rss,
      runMaxHeapUsed: Math.max(0, ...during.map((e) => e.heapUsed)),
      runMaxRss: Math.max(0, ...during.map((e) => e.rss)),
    });
  } else {
    let during = live.filter((p) => p.at >= triggered && p.at <= ended);
    // A run triggered at once (`after`) can end between two of the probe's lines, which come a
    // second or more apart on a busy machine: then the first line after it stands in.
    if (during.length === 0 && after) {
      during = [await cluster.waitFor(() => live.find((p) => p.at > ended), 10_000, 'a probe line after the run')];
    }
    const before = live.filter((p) => p.at < triggered).at(-1);
    if (during.length === 0 || !before) throw new Error(`no probe lines around run ${runId}`);
    Object.assign(sample, {
      peakLiveHeap: Math.max(...during.map((p) => p.liveHeap)),
      baselineLiveHeap: before.liveHeap,
      liveSamples: during.length,
      meanGcMs: during.reduce((a, p) => a + p.gcMs, 0) / during.length,
    });
  }
  return { sample, after: last };
}

const mib = (bytes: number | undefined): string => `${((bytes ?? Number.NaN) / MiB).toFixed(1)} MiB`;

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const small = options.smoke ? 1_000 : Number(process.env.BENCH_MEMORY_SMALL ?? 10_000);
  const large = options.smoke ? 2_000 : Number(process.env.BENCH_MEMORY_LARGE ?? 100_000);
  const trials = options.smoke ? 1 : Number(process.env.BENCH_MEMORY_TRIALS ?? 1);
  const started = performance.now();
  const samples: Sample[] = [];
  const print = (s: Sample): void => {
    if (!VERBOSE) return;
    const figures =
      s.arm === 'plain'
        ? `peak heap ${mib(s.peakHeapUsed)} (baseline ${mib(s.baselineHeapUsed)}), peak RSS ${mib(s.peakRss)} (baseline ${mib(s.baselineRss)})`
        : `peak live heap ${mib(s.peakLiveHeap)} (baseline ${mib(s.baselineLiveHeap)}, ${s.liveSamples} samples)`;
    console.error(`  ${s.arm} ${s.items} items, trial ${s.trial}: ${figures}, record ${s.checkpointBytes} B, run ${s.runMs} ms`);
  };
  if (options.smoke) {
    // A smoke run: one cluster per arm, the two side by side, each running the small size then
    // the large one (a cluster costs more than its tiny runs), whose baseline is the leader's
    // report right after the small run.
    const arms = await sideBySide(
      (['probe', 'plain'] as const).map((arm) => async () => {
        const started = await startCluster(arm, [small, large]);
        try {
          const measured: Sample[] = [];
          let after: MemoryEvent | undefined;
          for (const items of [small, large]) {
            const t0 = performance.now();
            let s: Sample;
            ({ sample: s, after } = await measureOn(started, items, 1, arm, after));
            s.wallMs = performance.now() - t0;
            measured.push(s);
            print(s);
          }
          return measured;
        } finally {
          await started.cluster.stop();
        }
      }),
    );
    samples.push(...arms.flat());
  } else {
    // Sizes and arms alternate, so drift on the machine falls on all alike.
    for (let trial = 1; trial <= trials; trial++) {
      for (const items of [small, large]) {
        for (const arm of ['probe', 'plain'] as const) {
          const t0 = performance.now();
          const s = await measure(items, trial, arm);
          s.wallMs = performance.now() - t0;
          samples.push(s);
          print(s);
        }
      }
    }
  }
  const of = (items: number, arm: Arm, pick: (s: Sample) => number | undefined): number =>
    median(samples.filter((s) => s.items === items && s.arm === arm).map((s) => pick(s) ?? Number.NaN));
  const figures = (items: number) => ({
    items,
    messages: of(items, 'plain', (s) => s.messages),
    peakLiveHeapMiB: of(items, 'probe', (s) => s.peakLiveHeap) / MiB,
    baselineLiveHeapMiB: of(items, 'probe', (s) => s.baselineLiveHeap) / MiB,
    liveRiseMiB: of(items, 'probe', (s) => (s.peakLiveHeap as number) - (s.baselineLiveHeap as number)) / MiB,
    peakHeapUsedMiB: of(items, 'plain', (s) => s.peakHeapUsed) / MiB,
    baselineHeapUsedMiB: of(items, 'plain', (s) => s.baselineHeapUsed) / MiB,
    heapRiseMiB: of(items, 'plain', (s) => (s.peakHeapUsed as number) - (s.baselineHeapUsed as number)) / MiB,
    peakRssMiB: of(items, 'plain', (s) => s.peakRss) / MiB,
    baselineRssMiB: of(items, 'plain', (s) => s.baselineRss) / MiB,
    rssRiseMiB: of(items, 'plain', (s) => (s.peakRss as number) - (s.baselineRss as number)) / MiB,
    checkpointBytes: of(items, 'plain', (s) => s.checkpointBytes),
    seenBytes: of(items, 'plain', (s) => s.seenBytes),
    runSeconds: of(items, 'plain', (s) => s.runMs) / 1000,
    probeRunSeconds: of(items, 'probe', (s) => s.runMs) / 1000,
  });
  const floorFigures = figures(small);
  const oursFigures = figures(large);
  const ratio = (key: keyof ReturnType<typeof figures>): number => oursFigures[key] / floorFigures[key];
  const ours = oursFigures.peakLiveHeapMiB;
  const floor = floorFigures.peakLiveHeapMiB;
  const summary = {
    headline:
      'peak live heap of the leader process: the most heap still in use after a forced full collection, ' +
      `sampled every ${PROBE_MS} ms (less often if a collection takes over a tenth of that) during the run (median of trials). Peak heap used also counts garbage V8 has not ` +
      'collected yet, which piles up further the longer a run lasts; peak RSS adds the allocator and V8 reserve.',
    instances: INSTANCES,
    itemsPerMessage: ITEMS_PER_MESSAGE,
    trials,
    probeMs: PROBE_MS,
    order: options.smoke
      ? 'smoke: one cluster (Azurite and instances) per arm, the two side by side, each running small then large'
      : 'per trial: small (probe, plain) then large (probe, plain), each on a fresh cluster (Azurite and instances)',
    floor: floorFigures,
    ours: oursFigures,
    ratios: {
      peakLiveHeap: ratio('peakLiveHeapMiB'),
      peakHeapUsed: ratio('peakHeapUsedMiB'),
      peakRss: ratio('peakRssMiB'),
      liveRise: ratio('liveRiseMiB'),
      heapRise: ratio('heapRiseMiB'),
      rssRise: ratio('rssRiseMiB'),
      checkpointBytes: ratio('checkpointBytes'),
    },
    goalByPeakHeapUsed: ratio('peakHeapUsedMiB') <= GOAL.ratio ? 'met' : 'missed',
    goalByPeakRss: ratio('peakRssMiB') <= GOAL.ratio ? 'met' : 'missed',
    wallSeconds: (performance.now() - started) / 1000,
  };
  return report(name, { samples, summary, ours, floor, unit: 'MiB', goal: GOAL }, options);
}
