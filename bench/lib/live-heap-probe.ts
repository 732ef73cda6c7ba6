import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { BenchInstance } from './bench-cluster';

/** The preload that forces a full collection every `probeMs` and prints the heap still live. */
const PROBE = resolve(__dirname, 'memory-probe.cjs');

/** One line of the probe: when, the live heap after a full collection, and how long it took. */
export interface ProbeLine {
  at: number;
  liveHeap: number;
  gcMs: number;
}

/** The environment that loads the probe into an instance process, every `probeMs`. */
export function probeEnv(probeMs: number): Record<string, string> {
  const inherited = process.env.NODE_OPTIONS?.trim();
  return {
    NODE_OPTIONS: `${inherited ? `${inherited} ` : ''}--require ${JSON.stringify(PROBE)}`,
    BENCH_MEMORY_PROBE_MS: String(probeMs),
  };
}

/** The probe's lines of one instance, read beside the cluster's own reader. */
export function readProbe(instance: BenchInstance): ProbeLine[] {
  const lines: ProbeLine[] = [];
  createInterface({ input: instance.proc.stdout! }).on('line', (line) => {
    if (line.startsWith('memory-probe ')) lines.push(JSON.parse(line.slice('memory-probe '.length)) as ProbeLine);
  });
  return lines;
}
