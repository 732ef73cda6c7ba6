import { expectedSynthetic, SYNTHETIC_FAILURE, type SyntheticJobSpec } from '../functions/synthetic-job';
import type { HeldMessage, WorkerDeath } from './chaos-instances';
import type { HungHook, LeaseDeleteTarget } from './fault-plan';
import type { Expectation } from './invariants';

/**
 * A work message a drained instance held as its drain began, and for how long it had
 * (`heldForMs`: up to 3 s, the host aborts it 1 to 3 s in if it still runs); when its code there
 * settled (`settledAfterMs`, from the drain); and when another instance took it up before that
 * (`takenBy`, `takenAfterMs`: it came back), with `ranOn` if the drained instance's process was
 * still running that code then, rather than gone.
 */
export interface DrainedMessage extends HeldMessage {
  heldForMs: number;
  settledAfterMs?: number;
  takenBy?: string;
  takenAfterMs?: number;
  ranOn?: boolean;
}

/** What a fault the soak aimed at something hit, for the report and for the checks of its effect. */
export type FaultTarget =
  /** `leader`: it held the lease when the signal was sent. */
  | { kind: 'bare-sigterm'; instance: string; leader: boolean; at: number }
  /**
   * `instance` drained at `at` as it took up a long message; `messages`, what it held then (of
   * `runs`); `aborted`, the invocations the host aborted there (its logged failures).
   */
  | {
      kind: 'drain-abort';
      instance: string;
      leader: boolean;
      at: number;
      runs: string[];
      aborted: number;
      messages: DrainedMessage[];
    }
  /**
   * `refused`: requests the proxy answered 500. How the leader met it, from its warnings:
   * `setAside`, its drains left the run's messages for a later pass; `stepErrors`, a step of the
   * run (or the takeover of its job) failed and was retried.
   */
  | { kind: 'unreadable-record'; run: string; from: number; to: number; refused: number; setAside: number; stepErrors: number }
  | ({ kind: 'worker-death' } & WorkerDeath)
  /** `started`: the job's state counted the run as started, so it must exist; otherwise only if it does. */
  | { kind: 'hung-hook'; hook: HungHook; run: string; item?: number; started: boolean }
  | { kind: 'lease-delete'; target: LeaseDeleteTarget; holder: string; at: number }
  /** `runs`: every run id the requests with `key` were answered with (one, if keys hold). */
  | { kind: 'keyed-trigger'; key: string; clients: number; requests: number; runs: string[] }
  /** `startedAt`: the new version's first instance up; `takeoverAt`: one of them led (null: none did). */
  | { kind: 'rolling-deploy'; version: string; from: string; startedAt: number; takeoverAt: number | null }
  /** The window in which every instance ran with its timers off. */
  | { kind: 'frozen-timer'; from: number; to: number }
  /** `instance` stopped at `stoppedAt` holding `held` (work messages of `runs`), and resumed at `resumedAt`. */
  | { kind: 'straggler'; instance: string; runs: string[]; held: HeldMessage[]; stoppedAt: number; resumedAt: number };

/**
 * What a hook that ignored its signal past its bound leaves behind (`HookTimeoutError`): a split
 * fails its run once it timed out `maxSplitTimeouts` times, a process fails its item on the last
 * attempt, and a finalize leaves its run ended as decided, with the error noted.
 */
export const HUNG_HOOK_EFFECT: Record<HungHook, RegExp> = {
  split: /^split timed out \d+ times?: split gave no item within [\d.]+ s and ignored its abort signal/,
  process: /^HookTimeoutError: process did not finish within [\d.]+ s and ignored its abort signal, so it was abandoned$/,
  finalize: /^finalize did not finish within [\d.]+ s and ignored its abort signal, so it was abandoned$/,
};

/**
 * What the poison copy of a work message fails its items with: the host moved the message there
 * after a delivery that never finished (its worker killed, paused past the message's
 * visibility, or unable to reach storage).
 */
export const POISON_COPY_REASON = /^no result after \d+ deliveries: the worker never finished this message$/;

const jobOf = (runId: string): string => runId.slice(0, runId.indexOf('/'));

/** A run as storage holds it at the end, for the times it was open. */
export interface RunSpan {
  createdAt: string;
  endedAt: string | null;
}

/**
 * Per run a fault was aimed at, what it must come to instead of its job's usual end: the runs a
 * hung hook or a worker's death reached. Every other run keeps its job's expectation, so a
 * fault whose effect leaks onto another run is still a violation there. `runs` are the runs
 * storage holds: a hook aimed at an occurrence the schedule skipped hit nothing.
 *
 * `disturbed` are the spans of faults that can cut any delivery short (kill -9 until the
 * replacement starts, a bare SIGTERM or a drain until the instance has exited, a pause of the
 * leader, a storage restart). A hung item whose last delivery one of them cut short fails
 * through the poison copy instead of its timeout: for a run open during such a fault, either
 * reason is the documented end, and the item must still fail.
 */
export function faultExpectations(
  jobs: readonly SyntheticJobSpec[],
  targets: readonly FaultTarget[],
  runs: ReadonlyMap<string, RunSpan>,
  disturbed: ReadonlyArray<{ from: number; to: number }> = [],
): Map<string, Expectation> {
  const out = new Map<string, Expectation>();
  const hungItems = new Map<string, number[]>();
  // A hung item's outcome is its timeout whoever reports it; the others of a message are by design.
  const hungIn = (run: string): Set<number> =>
    new Set(targets.flatMap((t) => (t.kind === 'hung-hook' && t.run === run && t.item !== undefined ? [t.item] : [])));
  for (const target of targets) {
    if (target.kind !== 'hung-hook' && target.kind !== 'worker-death') continue;
    if (target.kind === 'hung-hook' && !target.started && !runs.has(target.run)) continue;
    const spec = jobs.find((j) => j.name === jobOf(target.run));
    if (!spec) continue;
    const base = out.get(target.run) ?? { ...jobExpectation(spec), reasons: [] };
    const label = (what: string) => (base.fault ? `${base.fault}; ${what}` : what);
    if (target.kind === 'worker-death') {
      const { first, count, instance } = target;
      const hung = hungIn(target.run);
      const items = Array.from({ length: count }, (_, i) => first + i).filter((i) => !hung.has(i));
      // Its items fail by design, with their own reason: whichever delivery's result counts, and
      // never a poison copy's "no result" (the message is delivered again, not poisoned).
      out.set(target.run, {
        ...base,
        fault: label(`${instance} died after sending the result of items ${first}..${first + count - 1}`),
        reasons: [...(base.reasons ?? []), { items, reason: SYNTHETIC_FAILURE }],
      });
      continue;
    }
    const fault = label(`hung ${target.hook}${target.item === undefined ? '' : ` of item ${target.item}`}`);
    switch (target.hook) {
      case 'split':
        out.set(target.run, { ...base, fault, state: 'failed', endReason: HUNG_HOOK_EFFECT.split });
        break;
      case 'finalize':
        out.set(target.run, { ...base, fault, finalizeError: HUNG_HOOK_EFFECT.finalize });
        break;
      case 'process': {
        const item = target.item as number;
        const items = [...(hungItems.get(target.run) ?? []), item];
        hungItems.set(target.run, items);
        const { output, failed } = expectedSynthetic(spec, items);
        const span = runs.get(target.run);
        const from = span ? Date.parse(span.createdAt) : Number.NaN;
        const to = span?.endedAt ? Date.parse(span.endedAt) : Number.POSITIVE_INFINITY;
        const cutShort = disturbed.some((d) => d.from <= to && d.to >= from);
        const reason = cutShort ? eitherOf(HUNG_HOOK_EFFECT.process, POISON_COPY_REASON) : HUNG_HOOK_EFFECT.process;
        out.set(target.run, { ...base, fault, output, failed, reasons: [...(base.reasons ?? []), { items: [item], reason }] });
        break;
      }
    }
  }
  return out;
}

const eitherOf = (a: RegExp, b: RegExp): RegExp => new RegExp(`(?:${a.source})|(?:${b.source})`);

/** What every run of a soak job must come to: its known output, succeeded, and no finalize error. */
export function jobExpectation(spec: SyntheticJobSpec): Expectation {
  const { output, failed } = expectedSynthetic(spec);
  return { planned: spec.items, output, failed, state: 'succeeded', finalizeError: null };
}
