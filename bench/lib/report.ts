import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';

/** Where every benchmark writes its JSON: bench/results/<name>.json. */
export const RESULTS_DIR = resolve(__dirname, '..', 'results');

export interface MachineInfo {
  cores: number;
  cpuModel: string;
  totalMemBytes: number;
  platform: string;
  release: string;
  arch: string;
  node: string;
  date: string;
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cores: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    totalMemBytes: os.totalmem(),
    platform: os.platform(),
    release: os.release(),
    arch: os.arch(),
    node: process.version,
    date: new Date().toISOString(),
  };
}

export interface Goal {
  /** The target for ours / floor. */
  ratio: number;
  /** 'atLeast': ours/floor must be ≥ ratio (rates); 'atMost': ≤ ratio (latencies, memory). */
  direction: 'atLeast' | 'atMost';
}

export interface ResultInput {
  samples: unknown;
  summary: Record<string, unknown>;
  /** Our figure, in `unit`. */
  ours: number;
  /** The floor measured in the same run, in `unit`. */
  floor: number;
  unit: string;
  goal: Goal;
}

export interface BenchResult extends ResultInput {
  name: string;
  ratio: number;
  met: boolean;
  machine: MachineInfo;
  date: string;
}

/**
 * The entries of the list `summary[key]` that `fits`: results are read back from JSON files that
 * older runs wrote, so each entry is checked before it is used.
 */
export function summaryList<T>(
  result: BenchResult | undefined,
  key: string,
  fits: (entry: Record<string, unknown>) => boolean,
): T[] {
  const list = (result?.summary as Record<string, unknown> | undefined)?.[key];
  if (!Array.isArray(list)) return [];
  return list.filter((e): e is T => typeof e === 'object' && e !== null && fits(e as Record<string, unknown>));
}

export function ratioOf(ours: number, floor: number): number {
  return floor === 0 ? Number.NaN : ours / floor;
}

export function goalMet(ratio: number, goal: Goal): boolean {
  if (!Number.isFinite(ratio)) return false;
  return goal.direction === 'atLeast' ? ratio >= goal.ratio : ratio <= goal.ratio;
}

/**
 * What every benchmark's `run(options)` takes. `smoke` runs a tiny version (N small, one trial)
 * so `npm test` keeps each benchmark working; a smoke run writes no results.
 */
export interface BenchOptions {
  smoke?: boolean;
}

/** Writes the result (unless a smoke run), prints the one line, and returns the result. */
export function report(name: string, input: ResultInput, options: BenchOptions = {}): BenchResult {
  const result = options.smoke ? buildResult(name, input) : writeResult(name, input);
  printLine(result);
  return result;
}

function buildResult(name: string, input: ResultInput): BenchResult {
  const ratio = ratioOf(input.ours, input.floor);
  const machine = machineInfo();
  return {
    name,
    date: machine.date,
    machine,
    ours: input.ours,
    floor: input.floor,
    unit: input.unit,
    ratio,
    goal: input.goal,
    met: goalMet(ratio, input.goal),
    summary: input.summary,
    samples: input.samples,
  };
}

/** Writes bench/results/<name>.json (pretty) and returns what it wrote. */
export function writeResult(name: string, input: ResultInput): BenchResult {
  const result = buildResult(name, input);
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(join(RESULTS_DIR, `${name}.json`), `${JSON.stringify(result, null, 2)}\n`);
  return result;
}

function fmt(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/** The one line a benchmark prints: name, ours, floor, ratio, goal, met or missed. */
export function formatLine(r: { name: string; ours: number; floor: number; unit: string; goal: Goal }): string {
  const ratio = ratioOf(r.ours, r.floor);
  const sign = r.goal.direction === 'atLeast' ? '≥' : '≤';
  return [
    r.name,
    `ours ${fmt(r.ours)} ${r.unit}`,
    `floor ${fmt(r.floor)} ${r.unit}`,
    `ratio ${ratio.toFixed(3)}`,
    `goal ${sign} ${r.goal.ratio}`,
    goalMet(ratio, r.goal) ? 'met' : 'missed',
  ].join('  ');
}

export function printLine(r: { name: string; ours: number; floor: number; unit: string; goal: Goal }): void {
  console.log(formatLine(r));
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
