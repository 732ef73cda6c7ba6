import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { redactSecrets } from '../src/redact';
import { parseInstanceLine, type InstanceEvent } from '../src/local/instance-events';
import { stopInstance, type InstanceStopKind } from '../src/local/stop-rules';
import type { Term } from './invariants';

/** A worker that died on purpose right after sending an item's final failure, before its message was deleted. */
export interface WorkerDeath {
  instance: string;
  run: string;
  first: number;
  count: number;
  dequeueCount: number;
  at: number;
}

/** A work message a worker has taken up and not finished with (its result not sent). */
export interface HeldMessage {
  run: string;
  first: number;
  count: number;
}

/** Baton's record of an instance's own stop (its `stop` event), with when it was read. */
export type StopRecord = Omit<Extract<InstanceEvent, { kind: 'stop' }>, 'kind'> & { at: number };

/** How an instance's process ended. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

/** One stop the soak made by the host's rules (`stop-rules.ts`), as the instance and its process ended it. */
export interface HostStop {
  instance: string;
  kind: InstanceStopKind;
  /** When the host's stop began, and when the process had exited. */
  from: number;
  to: number;
  /** Its `stop` event; absent if it made none before it exited. */
  stop?: StopRecord;
  exit?: ProcessExit;
  /** When it reported drain mode reached (a drain only). */
  drainedAt?: number;
}

export interface ChaosInstance {
  name: string;
  proc: ChildProcess;
  alive: boolean;
  /** Its `BATON_APP_VERSION`. */
  version: string;
  /** Whether its timers are off (`BATON_LOCAL_FREEZE_TIMERS`). */
  frozen: boolean;
  /** When its host had started (ms since the epoch, as it reported). */
  startedAt?: number;
  /** When this instance last renewed the lease (ms since the epoch, as it reported). */
  lastRenewedAt?: number;
  /** Set when it died on purpose after sending a result (`BATON_CHAOS_DIE_AFTER_SENDING`). */
  death?: WorkerDeath;
  /** Tick messages its handlers hold now: each stays hidden while the term it woke lasts. */
  ticksHeld: number;
  /** Work messages its worker holds now, by `run#first`: reported only by an instance started with `BATON_CHAOS_REPORT_WORK=1`. */
  held: Map<string, HeldMessage>;
  /** When it took up each message it holds now (ms since the epoch), by the keys of `held`. */
  heldSince: Map<string, number>;
  /** Called, as its line is read, when it takes up a work message (`held`) or finishes one. */
  onWork?: (message: HeldMessage, held: boolean) => void;
  /** When its last line on stdout was read (ms since the epoch). */
  lastLineAt: number;
  /** Its own record of its stop, once it made one. */
  stop?: StopRecord;
  /** When it reported drain mode reached (`drained`). */
  drainedAt?: number;
  drained: Promise<void>;
  exit?: ProcessExit;
  exited: Promise<void>;
}

/**
 * The soak's instance processes: the compiled `instance-main`, as `baton start` runs them, with
 * their leader events, warnings and stderr appended to one log file (secrets redacted).
 */
export class ChaosInstances {
  readonly all: ChaosInstance[] = [];
  leaderChanges = 0;
  /** Every term of leadership an instance reported taking, with its epoch. */
  readonly terms: Term[] = [];
  /** Every warning the instances logged, as it came. */
  readonly warnings: Array<{ instance: string; at: number; message: string }> = [];
  private next = 1;
  /** The version new instances run: a rolling deploy raises it before it starts them. */
  version = '1.0.0';
  /** Whether new instances start with their timers off: a frozen-timer fault's window. */
  frozenTimers = false;
  /** Every stop made by the host's rules (`stop`), in the order they began. */
  readonly stops: HostStop[] = [];
  /** Called, as its line is read, when any instance takes up a work message (`held`) or finishes one. */
  readonly workWatchers = new Set<(instance: ChaosInstance, message: HeldMessage, held: boolean) => void>();

  constructor(
    private readonly env: () => NodeJS.ProcessEnv,
    private readonly logFile: string,
  ) {}

  get alive(): ChaosInstance[] {
    return this.all.filter((i) => i.alive);
  }

  /** Tick messages the live instances' handlers hold now. */
  get ticksHeld(): number {
    return this.alive.reduce((n, i) => n + i.ticksHeld, 0);
  }

  byName(name: string | undefined): ChaosInstance | undefined {
    return this.all.find((i) => i.name === name && i.alive);
  }

  /** Starts an instance; `env` adds to, or overrides, the settings every instance gets. */
  spawn(env: NodeJS.ProcessEnv = {}): ChaosInstance {
    const name = `instance-${this.next++}`;
    const script = join(__dirname, '..', 'src', 'local', `instance-main${__filename.endsWith('.ts') ? '.ts' : '.js'}`);
    const args = __filename.endsWith('.ts') ? ['--import', 'tsx', script] : [script];
    const proc = spawn(process.execPath, args, {
      env: {
        ...this.env(),
        BATON_INSTANCE: name,
        BATON_APP_VERSION: this.version,
        BATON_LOCAL_FREEZE_TIMERS: this.frozenTimers ? '1' : '0',
        ...env,
      },
      // stdin stays open: an instance stops when its stdin ends, so it cannot outlive the soak.
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let resolveExit!: () => void;
    let resolveDrained!: () => void;
    const instance: ChaosInstance = {
      name,
      proc,
      alive: true,
      version: this.version,
      frozen: this.frozenTimers,
      ticksHeld: 0,
      held: new Map(),
      heldSince: new Map(),
      lastLineAt: Date.now(),
      drained: new Promise<void>((r) => (resolveDrained = r)),
      exited: new Promise<void>((r) => (resolveExit = r)),
    };
    proc.on('exit', (code, signal) => {
      instance.exit = { code, signal, at: Date.now() };
      instance.alive = false;
      this.log(`${name} exited (${signal ?? `code ${code}`})`);
      resolveExit();
    });
    createInterface({ input: proc.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      instance.lastLineAt = Date.now();
      const event = parseInstanceLine(line);
      if (!event) {
        if (line.trim()) this.log(`${name}: ${line}`);
        return;
      }
      if (event.kind === 'started') instance.startedAt = event.at ?? Date.now();
      if (event.kind === 'ticks') instance.ticksHeld = event.held;
      if (event.kind === 'work') {
        const message = { run: event.run, first: event.first, count: event.count };
        const key = `${event.run}#${event.first}`;
        if (event.held) {
          instance.held.set(key, message);
          instance.heldSince.set(key, event.at ?? Date.now());
        } else {
          instance.held.delete(key);
          instance.heldSince.delete(key);
        }
        instance.onWork?.(message, event.held);
        for (const watch of this.workWatchers) watch(instance, message, event.held);
      }
      if (event.kind === 'drained') {
        instance.drainedAt = event.at ?? Date.now();
        resolveDrained();
        this.log(`${name} drained`);
      }
      if (event.kind === 'stop') {
        const { path, lease, durationMs } = event;
        instance.stop = { path, lease, ...(durationMs !== undefined ? { durationMs } : {}), at: event.at ?? Date.now() };
        this.log(`${name} stop (${path}): lease ${lease}${durationMs !== undefined ? ` in ${Math.round(durationMs)} ms` : ''}`);
      }
      if (event.kind === 'stopping') this.log(`${name} stopping: ${event.why}`);
      if (event.kind === 'chaos') {
        const { run, first, count, dequeueCount } = event;
        instance.death = { instance: name, run, first, count, dequeueCount, at: event.at ?? Date.now() };
        this.log(
          `${name} dies (SIGKILL) after sending the result of ${run} items ${first}..${first + count - 1}, delivery ${dequeueCount}`,
        );
      }
      if (event.kind === 'leader' && event.type === 'epoch-raised' && event.epoch !== undefined) {
        // Raised under the lease this instance took last: that term's.
        const term = [...this.terms].reverse().find((t) => t.holder === name);
        if (term) term.raisedTo = Math.max(term.raisedTo ?? 0, event.epoch);
        this.log(`${name} raised its epoch to ${event.epoch}`);
      }
      if (event.kind === 'leader' && event.type === 'renewed') instance.lastRenewedAt = event.at ?? Date.now();
      else if (event.kind === 'leader' && (event.type === 'acquired' || event.type === 'lost')) {
        if (event.type === 'acquired') {
          this.leaderChanges++;
          if (event.epoch !== undefined) {
            this.terms.push({ holder: name, epoch: event.epoch, at: event.at ?? Date.now(), version: instance.version });
          }
        }
        this.log(`${name} leadership ${event.type} epoch ${event.epoch ?? '?'}${event.reason ? ` (${event.reason})` : ''}`);
      } else if (event.kind === 'log' && event.level === 'warn') {
        this.log(`${name} warn: ${event.message}`);
        this.warnings.push({ instance: name, at: event.at ?? Date.now(), message: event.message });
      } else if (event.kind === 'log' && /^hedged \d+ message/.test(event.message)) {
        // The copies a leader sent: what a straggler's run was saved by, or waited for.
        this.log(`${name}: ${event.message}`);
      }
    });
    createInterface({ input: proc.stderr as NodeJS.ReadableStream }).on('line', (line) => this.log(`${name} stderr: ${line}`));
    this.all.push(instance);
    this.log(`${name} started (pid ${proc.pid}, version ${instance.version}${instance.frozen ? ', timers frozen' : ''})`);
    return instance;
  }

  /**
   * Stops `instance` as the Functions host would (`stop-rules.ts`: its WorkerTerminate, a bare
   * SIGTERM, SIGKILL, or a drain and then a bare SIGTERM; SIGKILL 5 s after the stop message or
   * signal), and resolves once it has exited. The host's command is sent before this returns its
   * promise, so a caller reacting to a line of the instance stops it at once.
   */
  stop(instance: ChaosInstance, kind: InstanceStopKind): Promise<HostStop> {
    // A stopped (SIGSTOP) process can neither read its stdin nor run a signal handler.
    instance.proc.kill('SIGCONT');
    const record: HostStop = { instance: instance.name, kind, from: Date.now(), to: 0 };
    this.stops.push(record);
    this.log(`${instance.name} stopped by the host: ${kind}`);
    return stopInstance(instance, kind, { drained: instance.drained }).then(() => {
      record.to = Date.now();
      return record;
    });
  }

  /** What became of each stop: filled in from the instances' events once they have all been read. */
  stopOutcomes(): HostStop[] {
    return this.stops.map((record) => {
      const instance = this.all.find((i) => i.name === record.instance);
      return {
        ...record,
        ...(instance?.stop ? { stop: instance.stop } : {}),
        ...(instance?.exit ? { exit: instance.exit } : {}),
        ...(instance?.drainedAt !== undefined ? { drainedAt: instance.drainedAt } : {}),
      };
    });
  }

  /**
   * Replaces every live instance, one at a time, as a deploy does: starts a new one (with the
   * current `version` and `frozenTimers`), waits for its host to start, then stops an old one as
   * the host does on a deploy or a restart, by its WorkerTerminate (killed 5 s after).
   * `onFirstStarted` runs once the first new one has started, before any old one stops.
   */
  async replaceAll(onFirstStarted?: (fresh: ChaosInstance) => Promise<void>): Promise<void> {
    const olds = this.alive;
    for (const [k, old] of olds.entries()) {
      const fresh = this.spawn();
      const until = Date.now() + 60_000;
      while (fresh.startedAt === undefined && fresh.alive && Date.now() < until) await pause(50);
      if (k === 0) await onFirstStarted?.(fresh);
      await this.stop(old, 'terminate');
    }
  }

  /** SIGINT (the whole cluster's stop) to every live instance, then SIGKILL for any still alive after `graceMs`. */
  async stopAll(graceMs = 10_000): Promise<void> {
    const live = this.alive;
    for (const instance of live) {
      // A paused instance cannot act on SIGTERM until it runs again.
      instance.proc.kill('SIGCONT');
      instance.proc.kill('SIGINT');
    }
    const timer = new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref());
    await Promise.race([Promise.all(live.map((i) => i.exited)), timer]);
    for (const instance of live) if (instance.alive) instance.proc.kill('SIGKILL');
    await Promise.all(live.map((i) => i.exited));
  }

  /** SIGCONT and SIGKILL to every live instance, synchronously (for a process that is exiting). */
  killAllNow(): void {
    for (const instance of this.alive) {
      instance.proc.kill('SIGCONT');
      instance.proc.kill('SIGKILL');
    }
  }

  log(line: string): void {
    appendFileSync(this.logFile, `${new Date().toISOString()} ${redactSecrets(line)}\n`);
  }
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
