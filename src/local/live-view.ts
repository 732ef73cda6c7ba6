import cliProgress from 'cli-progress';
import type { HubStatus } from '../hub/status';
import type { RunRecord } from '../hub/run-record';
import { redactSecrets } from '../redact';
import { visible } from '../visible';

export interface InstanceView {
  name: string;
  alive: boolean;
  items: number;
}

export interface ViewState {
  status: HubStatus | undefined;
  instances: InstanceView[];
  finished: RunRecord[];
  /** Set when storage could not be read for the last refresh. */
  error?: string;
}

/** How the cluster shows itself: a live TTY view, or plain timestamped lines. */
export interface ClusterView {
  update(state: ViewState): void;
  /** A one-off line (instance started, leader killed, …). */
  note(message: string): void;
  stop(): void;
}

/** Picks the live view for a terminal and log lines for everything else. */
export function createView(stream: NodeJS.WriteStream | NodeJS.WritableStream, tty: boolean): ClusterView {
  return tty ? new LiveView(stream as NodeJS.WriteStream) : new LogView(stream);
}

interface RateSample {
  at: number;
  done: number;
}

/**
 * The TTY view: a header with the leader, one progress bar per active run (done of total,
 * failed, items/s, ETA), items per instance, and the last finished runs. cli-progress redraws
 * it in place about twice a second.
 */
type Row = { kind: 'text'; text: string } | { kind: 'run'; text: string; tail: string; value: number; total: number };

const FORMATS = { text: '{text}', run: '{text} {bar} {value}/{total} {tail}' } as const;

class LiveView implements ClusterView {
  private readonly bars: cliProgress.MultiBar;
  private readonly lines: Array<{ kind: Row['kind']; bar: cliProgress.SingleBar }> = [];
  private readonly rates = new Map<string, RateSample[]>();

  private stopped = false;

  constructor(private readonly stream: NodeJS.WriteStream) {
    this.bars = new cliProgress.MultiBar(
      {
        stream,
        fps: 2,
        hideCursor: true,
        clearOnComplete: false,
        stopOnComplete: false,
        format: FORMATS.text,
        barsize: 30,
        autopadding: true,
      },
      cliProgress.Presets.shades_classic,
    );
  }

  update(state: ViewState): void {
    if (this.stopped) return;
    const rows = this.render(state);
    // Rows keep their place; a row that changes kind gets a bar of the other format.
    rows.forEach((row, i) => {
      const existing = this.lines[i];
      if (existing && existing.kind !== row.kind) {
        this.bars.remove(existing.bar);
        this.lines.splice(i, 1);
      }
      if (!this.lines[i] || this.lines[i]?.kind !== row.kind) {
        const bar = this.bars.create(1, 0, { text: '', tail: '' }, { format: FORMATS[row.kind] });
        this.lines.splice(i, 0, { kind: row.kind, bar });
      }
      const line = this.lines[i]?.bar;
      if (row.kind === 'run') {
        line?.setTotal(Math.max(1, row.total));
        line?.update(row.value, { text: row.text, tail: row.tail });
      } else line?.update(0, { text: row.text });
    });
    for (const extra of this.lines.splice(rows.length)) this.bars.remove(extra.bar);
  }

  note(message: string): void {
    // Every line the cluster prints passes here: instance output and storage errors, masked,
    // and with no control character left to drive the terminal (a note may span lines).
    const line = visible(redactSecrets(message), { keepNewlines: true });
    // Once stopped, the bars are gone: notes are plain lines below the last frame.
    if (this.stopped) this.stream.write(`${line}\n`);
    else this.bars.log(`${line}\n`);
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.bars.stop();
  }

  private render(state: ViewState): Row[] {
    const rows: Row[] = [];
    const text = (t: string) => rows.push({ kind: 'text', text: t });
    const leader = state.status?.leader;
    text(
      leader
        ? `leader ${visible(leader.identity ?? '?')}  epoch ${leader.epoch}  leading for ${seconds(leader.ledForMs)}`
        : state.error
          ? `storage unreachable: ${redactSecrets(state.error)}`
          : state.status?.restingUntil
            ? `resting until ${state.status.restingUntil} (nothing open or due before then; a trigger wakes it)`
            : 'no leader yet (the next coordinator tick elects one)',
    );
    for (const run of state.status?.activeRuns ?? []) {
      const { planned, succeeded, failed } = run.counters;
      const done = succeeded + failed;
      const rate = this.rate(run.runId, done);
      const eta = rate > 0 && planned > done ? `${Math.ceil((planned - done) / rate)}s` : '-';
      rows.push({
        kind: 'run',
        text: `${run.runId}  ${run.state.padEnd(11)}`,
        tail: `(${failed} failed)  ${rate.toFixed(0)} items/s  ETA ${eta}`,
        value: done,
        total: planned,
      });
    }
    if (state.instances.length) {
      text(`instances  ${state.instances.map((i) => `${i.name}${i.alive ? '' : ' (gone)'}: ${i.items} items`).join('   ')}`);
    }
    for (const run of state.finished.slice(0, 5)) {
      text(`finished   ${run.runId}  ${run.state}  ${run.outputKey ?? run.manifestKey ?? ''}`);
    }
    return rows;
  }

  private rate(runId: string, done: number): number {
    const now = Date.now();
    const samples = (this.rates.get(runId) ?? []).filter((s) => now - s.at <= 5000);
    samples.push({ at: now, done });
    this.rates.set(runId, samples);
    const first = samples[0];
    if (!first || now - first.at < 500) return 0;
    return ((done - first.done) * 1000) / (now - first.at);
  }
}

/** Not a terminal: one timestamped line per change. */
class LogView implements ClusterView {
  private lastLeader = '';
  private readonly runStates = new Map<string, string>();
  private readonly finishedSeen = new Set<string>();

  constructor(private readonly stream: NodeJS.WritableStream) {}

  update(state: ViewState): void {
    const leader = state.status?.leader;
    const resting = state.status?.restingUntil;
    const leaderKey = leader ? `${leader.identity} epoch ${leader.epoch}` : resting ? 'resting' : 'none';
    if (leaderKey !== this.lastLeader) {
      this.note(leader ? `leader: ${leaderKey}` : resting ? `leader: none (resting until ${resting})` : 'leader: none');
      this.lastLeader = leaderKey;
    }
    for (const run of state.status?.activeRuns ?? []) {
      if (this.runStates.get(run.runId) === run.state) continue;
      this.runStates.set(run.runId, run.state);
      this.note(`run ${run.runId}: ${run.state} (${run.counters.succeeded + run.counters.failed}/${run.counters.planned})`);
    }
    for (const run of state.finished) {
      if (this.finishedSeen.has(run.runId)) continue;
      this.finishedSeen.add(run.runId);
      const { succeeded, failed, planned } = run.counters;
      this.note(
        `run ${run.runId}: ${run.state}: ${succeeded} succeeded, ${failed} failed of ${planned}${run.outputKey ? `; output ${run.outputKey}` : ''}`,
      );
    }
  }

  note(message: string): void {
    // Every line the cluster prints passes here: instance output and storage errors, masked,
    // and with no control character left to drive the terminal (a note may span lines).
    this.stream.write(`${new Date().toISOString()} ${visible(redactSecrets(message), { keepNewlines: true })}\n`);
  }

  stop(): void {
    // Nothing to tidy: every line is already written.
  }
}

function seconds(ms: number | undefined): string {
  return ms === undefined ? '?' : `${Math.round(ms / 1000)}s`;
}
