import type { ChildProcess } from 'node:child_process';

/**
 * How the Functions host stops a worker process, which the local host follows by default (`baton
 * start`, the benchmarks, the chaos soak). `docs/testing.md` lists each rule with its source.
 *
 * - `terminate`: the host's `WorkerTerminate` message. The Node worker runs the app's
 *   `appTerminate` hooks and exits; the host kills the process 5 s after it asked
 *   (`WorkerConstants.WorkerTerminateGracePeriodInSeconds`, `GrpcWorkerChannel.StopWorkerProcess`).
 * - `sigterm`: a bare SIGTERM, as when the platform deletes a container (Flex scale-in, a drain):
 *   no hook runs (host issues #10479, #11942, exit code 143). The host's listeners stop, and the
 *   process has what a signal handler does with it; it is killed `HOST_KILL_AFTER_MS` later.
 * - `sigkill`: a crash, an out-of-memory kill, a host recycle: nothing runs.
 * - `drain`: drain mode, then a bare SIGTERM. The host stops its listeners, and invocations that
 *   started near the drain are aborted 1 to 3 s in (host issue #12007); the rest may finish,
 *   for up to `DRAIN_WAIT_MS` here.
 */
export type InstanceStopKind = 'terminate' | 'sigterm' | 'sigkill' | 'drain';

export const INSTANCE_STOP_KINDS: readonly InstanceStopKind[] = ['terminate', 'sigterm', 'sigkill', 'drain'];

/** From the host's stop message (or the signal) to SIGKILL. */
export const HOST_KILL_AFTER_MS = 5000;

/**
 * How long a drained instance may finish what it runs before its SIGTERM. The platform waits up
 * to an hour on Flex (host issue #11692); shorter here, so that a run of the benchmarks and the
 * soak sees the SIGTERM that follows.
 */
export const DRAIN_WAIT_MS = 10_000;

/** Which invocations a drain aborts, and when (host issue #12007): those started up to 3 s before it, 1 to 3 s in. */
export const DRAIN_RULE = {
  nearMs: 3000,
  abortAfterMs: (): number => 1000 + Math.random() * 2000,
} as const;

/** What the cluster, speaking for the host, writes on an instance's stdin. */
export type HostCommand = 'terminate' | 'drain';

export function hostCommandLine(command: HostCommand): string {
  return `${JSON.stringify({ host: command })}\n`;
}

/** The host's command on one stdin line, if it is one. */
export function parseHostCommand(line: string): HostCommand | undefined {
  try {
    const parsed = JSON.parse(line) as { host?: unknown } | null;
    return parsed?.host === 'terminate' || parsed?.host === 'drain' ? parsed.host : undefined;
  } catch {
    return undefined;
  }
}

/** A running instance process, as whoever started it knows it. */
export interface StoppableInstance {
  readonly proc: ChildProcess;
  /** Settles once the process has exited. */
  readonly exited: Promise<void>;
}

/**
 * Stops `instance` as the host would (see `InstanceStopKind`) and resolves once it has exited.
 * `drained` settles when the instance reports drain mode reached (its `drained` event); without
 * it, a drain waits `DRAIN_WAIT_MS`.
 */
export async function stopInstance(
  instance: StoppableInstance,
  kind: InstanceStopKind,
  options: { drained?: Promise<void>; killAfterMs?: number } = {},
): Promise<void> {
  const { proc, exited } = instance;
  const killAfterMs = options.killAfterMs ?? HOST_KILL_AFTER_MS;
  if (kind === 'sigkill') {
    proc.kill('SIGKILL');
    return exited;
  }
  if (kind === 'drain') {
    proc.stdin?.write(hostCommandLine('drain'));
    await within(Promise.race([options.drained ?? new Promise<void>(() => undefined), exited]), DRAIN_WAIT_MS);
  }
  if (kind === 'terminate') proc.stdin?.write(hostCommandLine('terminate'));
  else proc.kill('SIGTERM');
  // The host does not wait longer than its grace.
  if (!(await within(exited, killAfterMs))) proc.kill('SIGKILL');
  return exited;
}

/** Whether `promise` settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
