import { describeThrown, InvalidSettingError } from '../errors';
import { randomUUID } from 'node:crypto';
import { InvocationContext, type Timer } from '@azure/functions';
import { Cron } from 'croner';
import type { QueueRegistration, Registration, TimerRegistration } from '../app/registration-types';
import type { QueuePort, ReceivedMessage } from '../queue/queue-port';
import { redactSecrets } from '../redact';
import type { HostQueueConfig } from '../app/host-config';
import { pumpQueue } from './queue-pump';
import { asTickMessage } from '../app/registrations';

/** Invocations a host ran and how long they took in all, as a consumption plan bills them. */
export interface InvocationTime {
  count: number;
  ms: number;
}

type InvocationKind = 'coordinator' | 'worker';

export interface LocalHostOptions {
  registrations: readonly Registration[];
  queues: (name: string) => QueuePort;
  hostConfig: HostQueueConfig;
  /** Where invocation logs go (level, text). */
  log: (level: string, message: string) => void;
  /**
   * Visibility for received messages; renewed while a handler runs. Default 30 s: shorter than
   * the Functions host's 10 minutes, so a killed instance's messages come back sooner locally.
   */
  visibilityTimeoutSeconds?: number;
}

/**
 * Runs a registration list the way the Functions host would, without it: timers on their
 * NCRONTAB schedules (never overlapping themselves), queue triggers with the host.json batch,
 * retry and poison settings, and every handler called with a real `InvocationContext`.
 */
export class LocalHost {
  private readonly timers: Cron[] = [];
  private readonly running = new Set<Promise<unknown>>();
  private readonly stopping = new AbortController();
  private readonly pumps: Promise<void>[] = [];
  /** Ended invocations by kind (see `invocationTime`). */
  private readonly ended: Record<InvocationKind, InvocationTime> = {
    coordinator: { count: 0, ms: 0 },
    worker: { count: 0, ms: 0 },
  };
  /** Invocations under way, by when they started (`performance.now()`). */
  /**
   * Keyed by the host's view of each (it settles when the host counts the invocation ended, which
   * an abort makes sooner than its code: see `drain`).
   */
  private readonly underWay = new Map<Promise<unknown>, { kind: InvocationKind; startedAt: number; abort(): void }>();

  constructor(private readonly options: LocalHostOptions) {
    // Orchestrations and activities need the Durable Task extension, which only the Functions host has.
    if (options.registrations.some((r) => r.kind === 'orchestration' || r.kind === 'activity')) {
      throw new InvalidSettingError(
        'BATON_ENGINE',
        'BATON_ENGINE=durable needs the Functions host with the Durable extension (func start, or Azure); the local cluster runs the queue engine',
      );
    }
  }

  start(): void {
    for (const registration of this.options.registrations) {
      if (registration.kind === 'timer') this.startTimer(registration);
      else if (registration.kind === 'queue') this.startQueue(registration);
    }
  }

  /**
   * Invocations so far and the time they took, by kind: the coordinator's (its timer, and tick
   * messages on the work queue) and the workers'. What Baton's idle cost is measured by: a
   * coordinator invocation held open is billed. Those under way count with the time they have
   * run so far, so the difference of two readings is the time spent between them.
   */
  invocationTime(): Record<InvocationKind, InvocationTime> {
    const now = performance.now();
    const time = { coordinator: { ...this.ended.coordinator }, worker: { ...this.ended.worker } };
    for (const { kind, startedAt } of this.underWay.values()) {
      time[kind].count++;
      time[kind].ms += now - startedAt;
    }
    return time;
  }

  /** Stops timers and queue polling, then waits for the invocations in flight. */
  async stop(): Promise<void> {
    this.stopListening();
    await Promise.allSettled([...this.pumps, ...this.running]);
  }

  /** Stops timers and queue polling; invocations under way run on. */
  stopListening(): void {
    for (const timer of this.timers) timer.stop();
    this.stopping.abort();
  }

  /**
   * Drain mode, as the Functions host enters it before a scale-in: no new invocations, and each
   * one under way that started within `nearMs` of the drain is aborted `abortAfterMs()` after its
   * start (host issue #12007: "Worker channel is shutting down. Aborting function."). An aborted
   * invocation counts as failed (a queue message comes back) while its code runs on in the
   * process, as it does in a real worker. Resolves once none is under way, by the host's count.
   */
  async drain(options: { nearMs: number; abortAfterMs: () => number }): Promise<void> {
    this.stopListening();
    const now = performance.now();
    for (const under of this.underWay.values()) {
      if (now - under.startedAt > options.nearMs) continue;
      const delay = Math.max(0, under.startedAt + options.abortAfterMs() - now);
      setTimeout(under.abort, delay).unref();
    }
    while (this.underWay.size > 0) await Promise.race([...this.underWay.keys()].map((hosted) => hosted.catch(() => undefined)));
  }

  private startTimer(registration: TimerRegistration): void {
    let last: Date | undefined;
    const cron = new Cron(registration.schedule, { timezone: 'UTC', protect: true }, async () => {
      if (this.stopping.signal.aborted) return;
      const now = new Date();
      const timer: Timer = {
        isPastDue: false,
        schedule: { adjustForDST: false },
        scheduleStatus: {
          last: (last ?? now).toISOString(),
          // From the same instant as lastUpdated: a busy machine may cross a second between reads.
          next: cron.nextRun(now)?.toISOString() ?? '',
          lastUpdated: now.toISOString(),
        },
      };
      last = now;
      await this.invoke(registration.name, {}, (context) => registration.handler(timer, context), false, 'coordinator');
    });
    this.timers.push(cron);
  }

  private startQueue(registration: QueueRegistration): void {
    const queue = this.options.queues(registration.queueName);
    const poison = this.options.queues(`${registration.queueName}-poison`);
    const config = this.options.hostConfig;
    // Create the queue first if it can be; if not, the pump's receives report the problem and retry.
    const pump = queue
      .ensure()
      .catch((err: unknown) => this.options.log('warning', `${registration.name}: cannot create ${queue.name}: ${describe(err)}`))
      .then(() =>
        pumpQueue(
          queue,
          poison,
          async (message) => {
            const entry = this.decode(message);
            await this.invoke(
              registration.name,
              triggerMetadata(message),
              (context) => registration.handler(entry, context),
              true,
              asTickMessage(entry) ? 'coordinator' : 'worker',
            );
          },
          this.stopping.signal,
          {
            batchSize: config.batchSize,
            newBatchThreshold: config.newBatchThreshold,
            maxDequeueCount: config.maxDequeueCount,
            retryDelaySeconds: config.retryDelaySeconds,
            ...(config.maxPollingIntervalMs !== undefined ? { maxPollingIntervalMs: config.maxPollingIntervalMs } : {}),
            visibilityTimeoutSeconds: this.options.visibilityTimeoutSeconds ?? 30,
            onError: (error, message) => {
              if (!message) this.options.log('warning', `${registration.name}: receive failed: ${describe(error)}`);
            },
          },
        ),
      );
    this.pumps.push(pump);
  }

  /** What the Node worker hands a queue handler: JSON bodies parsed, other text as a string. */
  private decode(message: ReceivedMessage): unknown {
    let text = message.text;
    if (this.options.hostConfig.messageEncoding === 'base64') {
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text))
        throw new Error('message is not valid base64 (host.json messageEncoding is base64)');
      text = Buffer.from(text, 'base64').toString('utf8');
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }

  private async invoke(
    functionName: string,
    metadata: Record<string, unknown>,
    call: (context: InvocationContext) => Promise<unknown>,
    rethrow = false,
    kind: InvocationKind = 'worker',
  ): Promise<void> {
    const context = new InvocationContext({
      functionName,
      invocationId: randomUUID(),
      triggerMetadata: metadata,
      logHandler: (level, ...args) => this.options.log(level, `${functionName}: ${args.map(String).join(' ')}`),
    });
    const startedAt = performance.now();
    const invocation = call(context);
    this.running.add(invocation);
    void invocation.then(
      () => this.running.delete(invocation),
      () => this.running.delete(invocation),
    );
    let abort!: () => void;
    const aborted = new Promise<never>((_, reject) => {
      abort = () => reject(new Error(`${functionName} aborted by the host: worker channel is shutting down (drain)`));
    });
    // An aborted invocation ends for the host now; its code runs on in this process.
    const hosted = Promise.race([invocation, aborted]);
    this.underWay.set(hosted, { kind, startedAt, abort });
    try {
      await hosted;
    } catch (error) {
      this.options.log('error', `${functionName} failed: ${describe(error)}`);
      if (rethrow) throw error;
    } finally {
      this.underWay.delete(hosted);
      const time = this.ended[kind];
      time.count++;
      time.ms += performance.now() - startedAt;
    }
  }
}

function triggerMetadata(message: ReceivedMessage): Record<string, unknown> {
  return { id: message.id, popReceipt: message.popReceipt, dequeueCount: message.dequeueCount };
}

function describe(error: unknown): string {
  return redactSecrets(describeThrown(error));
}
