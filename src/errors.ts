/**
 * Every error Baton throws on purpose is a `BatonError` with a stable `code`, so callers can
 * branch on `err.code` (as with the Azure SDK's `RestError.code`) instead of on messages.
 */
export type BatonErrorCode =
  | 'InvalidConfig'
  | 'InvalidSetting'
  | 'LeaseHeld'
  | 'LeaseLost'
  | 'StaleEpoch'
  | 'ConcurrentUpdate'
  | 'CorruptLease'
  | 'HookTimeout'
  | 'TaskAbandoned'
  | 'InvalidRunId';

export class BatonError extends Error {
  readonly code: BatonErrorCode;

  constructor(code: BatonErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A constructor option breaks a rule. `option` names it; the message says the rule. */
export class InvalidConfigError extends BatonError {
  readonly option: string;

  constructor(option: string, message: string) {
    super('InvalidConfig', message);
    this.option = option;
  }
}

/**
 * An app setting (environment variable) is missing or malformed. The message names the setting
 * and never repeats its value, because settings can hold keys.
 */
export class InvalidSettingError extends BatonError {
  readonly setting: string;

  constructor(setting: string, message: string) {
    super('InvalidSetting', message);
    this.setting = setting;
  }
}

/**
 * A run id that is not one (`<job>/<occurrence or manual-id>`): refused before it names a blob,
 * since storage resolves `..` in a blob's name and could reach another hub's run.
 */
export class InvalidRunIdError extends BatonError {
  readonly runId: string;

  constructor(runId: string, message: string) {
    super('InvalidRunId', message);
    this.runId = runId;
  }
}

/** Another holder has the lease right now; `holder` is who, when the store knows. */
export class LeaseHeldError extends BatonError {
  readonly holder: string | undefined;

  constructor(holder?: string, options?: { cause?: unknown }) {
    super('LeaseHeld', holder ? `the lease is held by ${holder}` : 'the lease is held by another holder', options);
    this.holder = holder;
  }
}

/**
 * Why a leader stopped being leader.
 * - `conflict`: storage says another lease id holds the lease (or the blob is gone).
 * - `broken`: someone broke the lease (`breakLease`).
 * - `deadline`: no renewal succeeded before the renew deadline, so the lease may have expired.
 * - `stalled`: the task stopped calling `heartbeat()`, so the elector stopped renewing.
 */
export type LeaseLossReason = 'conflict' | 'broken' | 'deadline' | 'stalled';

export class LeaseLostError extends BatonError {
  readonly reason: LeaseLossReason;

  constructor(reason: LeaseLossReason, detail?: string, options?: { cause?: unknown }) {
    super('LeaseLost', `leadership lost (${reason})${detail ? `: ${detail}` : ''}`, options);
    this.reason = reason;
  }
}

/**
 * A fenced write was refused because the stored document was written by a newer epoch than
 * the writer's: the writer is a stale leader and must stop.
 */
export class StaleEpochError extends BatonError {
  readonly writerEpoch: number;
  readonly storedEpoch: number;
  readonly key: string;

  constructor(key: string, writerEpoch: number, storedEpoch: number) {
    super('StaleEpoch', `write to ${key} refused: writer epoch ${writerEpoch} is older than stored epoch ${storedEpoch}`);
    this.key = key;
    this.writerEpoch = writerEpoch;
    this.storedEpoch = storedEpoch;
  }
}

/** The document changed (or appeared) since it was read; read it again and retry. */
export class ConcurrentUpdateError extends BatonError {
  readonly key: string;

  constructor(key: string, options?: { cause?: unknown }) {
    super('ConcurrentUpdate', `${key} changed since it was read`, options);
    this.key = key;
  }
}

/**
 * The lease record in storage cannot be read safely (for example a damaged epoch). Baton
 * refuses to lead on it rather than guess; an operator must repair or remove it, with every
 * instance stopped.
 */
export class CorruptLeaseError extends BatonError {
  readonly where: string;

  constructor(where: string, problem: string) {
    super('CorruptLease', `lease record ${where} is unusable: ${problem}`);
    this.where = where;
  }
}

export function isBatonError<C extends BatonErrorCode>(err: unknown, code?: C): err is BatonError & { code: C } {
  return err instanceof BatonError && (code === undefined || err.code === code);
}

/** Which job hook a `HookTimeoutError` is about. */
export type HookName = 'split' | 'process' | 'finalize' | 'onItemFailed';

/**
 * A job hook ran past its time bound. `abandoned` says whether it ignored its aborted signal
 * for the whole grace period too: it may still be running, and nothing waits for it any more.
 */
export class HookTimeoutError extends BatonError {
  readonly hook: HookName;
  readonly timeoutMs: number;
  readonly abandoned: boolean;

  constructor(hook: HookName, timeoutMs: number, abandoned: boolean) {
    super(
      'HookTimeout',
      `${hook} ${hook === 'split' ? 'gave no item' : 'did not finish'} within ${timeoutMs / 1000} s` +
        (abandoned ? ' and ignored its abort signal, so it was abandoned' : ''),
    );
    this.hook = hook;
    this.timeoutMs = timeoutMs;
    this.abandoned = abandoned;
  }
}

/**
 * A leader's task did not stop within `abandonTaskAfterMs` of the end of its term; the elector
 * stopped waiting for it so this candidate can lead again. The cause is why the term ended.
 */
export class TaskAbandonedError extends BatonError {
  readonly waitedMs: number;

  constructor(waitedMs: number, cause: unknown) {
    super('TaskAbandoned', `the leader task did not stop within ${waitedMs} ms of the end of its term, so it was abandoned`, {
      cause,
    });
    this.waitedMs = waitedMs;
  }
}

/** What a line about a failure quotes: an `Error`'s message, or any other thrown value as text. */
export function messageOf(thrown: unknown): string {
  return thrown instanceof Error ? thrown.message : String(thrown);
}

/** The same led by the error's name (`TypeError: …`), where the kind of failure is the news. */
export function describeThrown(thrown: unknown): string {
  return thrown instanceof Error ? `${thrown.name}: ${thrown.message}` : String(thrown);
}
