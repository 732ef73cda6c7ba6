import { isTerminal } from '../hub/run-record';
import type { RunView, RunsView, ShowView, StatusView } from '../hub/read-model';
import { visible } from '../visible';

/** The lines of a human view, each with its control characters made visible (a forged reason cannot drive the terminal). */
const screen = (lines: readonly string[]): string => `${lines.map((line) => visible(line)).join('\n')}\n`;

export function toJson(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

// ---- human text ---------------------------------------------------------------------------

/** `3s`, `4m05s`, `2h07m`, `3d04h`. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d${String(h % 24).padStart(2, '0')}h`;
}

/** An ISO time with its age (`2024-05-01T10:00:00.000Z (3m05s ago)`), or `-`. */
export function formatTime(iso: string | null | undefined, now: Date): string {
  if (!iso) return '-';
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return iso;
  const delta = now.getTime() - at;
  return `${iso} (${delta >= 0 ? `${formatDuration(delta)} ago` : `in ${formatDuration(-delta)}`})`;
}

/** `7/10 70%` plus failures when there are any. */
export function formatProgress(run: RunView): string {
  const { planned, failed } = run.counters;
  if (planned === 0) return run.state === 'planning' ? 'planning' : '0/0';
  const pct = Math.floor((run.done / planned) * 100);
  return `${run.done}/${planned} ${pct}%${failed > 0 ? ` (${failed} failed)` : ''}`;
}

/** Left-aligned columns separated by two spaces; trailing spaces trimmed. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all.map((r) =>
    r
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd(),
  );
}

/** `label  value` lines with the labels padded to one width. */
export function fields(pairs: readonly (readonly [string, string])[]): string[] {
  const width = Math.max(...pairs.map(([label]) => label.length));
  return pairs.map(([label, value]) => `${label.padEnd(width)}  ${value}`.trimEnd());
}

const CHANGES_SHOWN = 5;

export function renderStatus(view: StatusView, now: Date): string {
  const lines: string[] = [];
  // Since it took over from another: an idle leader's back-to-back terms are one stretch.
  const ledFor = (l: NonNullable<StatusView['leader']>): number | null =>
    l.since !== null ? Math.max(0, now.getTime() - Date.parse(l.since)) : l.ledForMs;
  const ledMs = view.leader && ledFor(view.leader);
  const leader = view.leader
    ? `${view.leader.identity ?? '(unknown identity)'}  epoch ${view.leader.epoch}` +
      (view.leader.version !== null ? `  v${view.leader.version} priority ${view.leader.priority ?? 0}` : '') +
      (ledMs !== null && ledMs !== undefined ? `  leading for ${formatDuration(ledMs)}` : '')
    : view.restingUntil !== null
      ? `resting until ${formatTime(view.restingUntil, now)} (nothing open or due before then; a trigger wakes it)` +
        (view.lastLeader ? `; last ${view.lastLeader.identity} epoch ${view.lastLeader.epoch}` : '')
      : 'none (no instance holds the lease)' +
        (view.lastLeader
          ? `; last ${view.lastLeader.identity} epoch ${view.lastLeader.epoch} (idle leaders free it between ticks)`
          : '');
  lines.push(
    ...fields([
      ['hub', `${view.hub}  (${view.endpoint})`],
      ['leader', leader],
    ]),
  );
  if (view.leadershipChanges.length > 0) {
    lines.push('');
    lines.push(
      `leadership changes: last ${Math.min(view.leadershipChanges.length, CHANGES_SHOWN)} of ${view.leadershipChanges.length} kept`,
    );
    lines.push(
      ...indent(
        table(
          ['WHEN', 'LEADER', 'EPOCH', 'WHY'],
          view.leadershipChanges.slice(0, CHANGES_SHOWN).map((c) => [formatTime(c.at, now), c.holder, String(c.epoch), c.why]),
        ),
      ),
    );
  }
  lines.push('');
  if (view.activeRuns.length === 0) lines.push('active runs: none');
  else {
    lines.push(`active runs: ${view.activeRuns.length}`);
    lines.push(
      ...indent(
        table(
          ['RUN', 'STATE', 'PROGRESS', 'STARTED', 'OLDEST WAITING'],
          view.activeRuns.map((r) => [
            r.runId,
            r.state + (r.cancelRequested ? ' (cancelling)' : ''),
            formatProgress(r),
            formatTime(r.createdAt, now),
            oldestWaiting(r, now),
          ]),
        ),
      ),
    );
  }
  lines.push('');
  if (view.jobs.length === 0) lines.push('jobs: none recorded yet (no leader has checked a schedule in this hub)');
  else {
    lines.push(`jobs: ${view.jobs.length}`);
    lines.push(
      ...indent(
        table(
          ['JOB', 'LAST CHECKED', 'ACTIVE', 'SKIPPED', 'MISSED', 'START LAG (LAST, MAX)'],
          view.jobs.map((j) => [
            j.job,
            formatTime(j.lastChecked, now),
            String(j.active.length),
            String(j.recent.skipped),
            String(j.recent.missed),
            formatLags(j.occurrences),
          ]),
        ),
      ),
    );
    for (const j of view.jobs) {
      const schedule = j.schedule;
      if (schedule) {
        const next = schedule.next[0];
        const jitter = schedule.jitterSeconds > 0 ? `, jitter ${schedule.jitterSeconds} s` : '';
        const when = next ? `; next ${next.local}${schedule.timeZone === 'UTC' ? '' : ` (${next.at.slice(0, 19)}Z)`}` : '';
        lines.push(`  ${j.job}: ${schedule.expression} in ${schedule.timeZone}${jitter}${when}`);
      }
      const last = j.lastSkipOrMiss;
      if (last)
        lines.push(`  ${j.job}: last ${last.outcome} ${formatTime(last.at, now)}${last.reason ? `: ${last.reason}` : ''}`);
    }
  }
  return screen(lines);
}

/** The message an open run has waited for longest: `message 3 (items 30-39) for 2m05s`, or `-`. */
function oldestWaiting(run: RunView, now: Date): string {
  const o = run.outstanding[0];
  if (!o) return '-';
  const items = o.count <= 1 ? `item ${o.first}` : `items ${o.first}-${o.first + o.count - 1}`;
  return `message ${o.message} (${items}) for ${formatDuration(o.ageMs ?? now.getTime() - Date.parse(o.since))}`;
}

/** A lag as people read it: milliseconds under a second, then seconds, then longer units. */
export function formatLag(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return formatDuration(ms);
}

/** The newest start's lag and the largest among the job's listed starts. */
function formatLags(occurrences: StatusView['jobs'][number]['occurrences']): string {
  const lags = occurrences.flatMap((o) => (o.startLagMs === null ? [] : [o.startLagMs]));
  if (lags.length === 0) return '-';
  return `${formatLag(lags[0] as number)}, ${formatLag(Math.max(...lags))}`;
}

export function renderRuns(view: RunsView & { next?: string | null }, now: Date): string {
  if (view.runs.length === 0) return `no runs in hub ${view.hub}${view.job ? ` for job ${view.job}` : ''}\n`;
  const older = view.next ? `older runs: baton runs${view.job ? ` --job ${view.job}` : ''} --after ${view.next}\n` : '';
  const rows = view.runs.map((r) => [
    r.runId,
    r.state + (r.cancelRequested && !isTerminal(r.state) ? ' (cancelling)' : ''),
    formatProgress(r),
    formatTime(r.createdAt, now),
    r.endedAt ? `took ${formatDuration(Date.parse(r.endedAt) - Date.parse(r.createdAt))}` : '',
  ]);
  return screen(table(['RUN', 'STATE', 'PROGRESS', 'CREATED', ''], rows)) + older;
}

const FAILURES_SHOWN = 10;
const OUTPUT_LINES_SHOWN = 40;

export function renderShow(view: ShowView, now: Date): string {
  const r = view.run;
  const c = r.counters;
  const pairs: [string, string][] = [
    ['run', r.runId],
    ['job', `${r.job}  (${r.trigger}${r.occurrence ? `, occurrence ${r.occurrence}` : ''})`],
    ['state', r.state + (r.cancelRequested && !isTerminal(r.state) ? ' (cancel requested)' : '')],
    ['progress', formatProgress(r)],
    [
      'counters',
      `planned ${c.planned}  dispatched ${c.dispatched}  succeeded ${c.succeeded}  failed ${c.failed}  duplicates ${c.duplicates}  rejected ${c.rejected}`,
    ],
    ...(r.hedges > 0 ? [['hedged', `${r.hedges} copies of straggling work messages`] as [string, string]] : []),
    ['created', formatTime(r.createdAt, now)],
    [
      isTerminal(r.state) ? 'ended' : 'deadline',
      isTerminal(r.state) ? formatTime(r.endedAt, now) : formatTime(r.deadlineAt, now),
    ],
  ];
  const lags = [
    r.startLagMs === null ? undefined : `start ${formatLag(r.startLagMs)} after its occurrence`,
    r.firstItemLagMs === null
      ? undefined
      : `first item counted ${formatLag(r.firstItemLagMs)} after ${r.occurrence ? 'it' : 'creation'}`,
  ].filter((lag) => lag !== undefined);
  if (lags.length > 0) pairs.push(['lag', lags.join('; ')]);
  if (r.endReason) pairs.push(['reason', r.endReason]);
  if (r.finalizeError) pairs.push(['finalize', `hook failed: ${r.finalizeError}`]);
  const pruned = r.pruned;
  pairs.push(['output', view.outputPath ?? (pruned?.output ? `deleted by retention ${formatTime(pruned.output, now)}` : '-')]);
  const f = view.failures;
  pairs.push([
    'failures',
    f?.soFar
      ? `${f.failedCount} failed so far (as of the last checkpoint), ${f.missingCount} not counted yet`
      : f
        ? `${f.failedCount} failed, ${f.missingCount} without an outcome`
        : pruned?.details
          ? `${c.failed} failed; the list was deleted by retention ${formatTime(pruned.details, now)}`
          : isTerminal(r.state)
            ? 'no manifest'
            : '- (listed when the run ends)',
  ]);
  if (r.outstanding.length > 0) pairs.push(['waiting', `oldest ${r.outstanding.length} work message(s) sent and not counted:`]);
  const lines = fields(pairs);
  // Before the failures' own table, under its line: the messages an open run waits for.
  if (r.outstanding.length > 0) {
    const at = lines.findIndex((l) => l.startsWith('waiting '));
    lines.splice(at + 1, 0, ...indent(outstandingTable(r.outstanding, now)));
  }
  if (f && f.failed.length > 0) {
    lines.push(
      ...indent(
        table(
          ['ITEM', 'ATTEMPTS', 'REASON'],
          f.failed.slice(0, FAILURES_SHOWN).map((e) => [String(e.item), String(e.attempts), e.reason.replace(/\s+/g, ' ')]),
        ),
      ),
    );
    const more = f.failedCount - Math.min(f.failed.length, FAILURES_SHOWN);
    if (more > 0) lines.push(`  ... and ${more} more (baton failures ${r.runId})`);
  }
  if (f?.unreadableParts) lines.push(`  not listed, gone from storage: ${f.unreadableParts.join(', ')}`);
  if (view.output !== null) {
    lines.push('', 'output:');
    const text = (JSON.stringify(view.output, null, 2) ?? String(view.output)).split('\n');
    lines.push(...indent(text.slice(0, OUTPUT_LINES_SHOWN)));
    if (text.length > OUTPUT_LINES_SHOWN) lines.push(`  ... ${text.length - OUTPUT_LINES_SHOWN} more lines (use --json)`);
  }
  return screen(lines);
}

/** The messages a run waits for: which items, since when, for how long (storage's clock). */
function outstandingTable(outstanding: RunView['outstanding'], now: Date): string[] {
  return table(
    ['MESSAGE', 'ITEMS', 'WAITING'],
    outstanding.map((o) => [
      String(o.message),
      o.count <= 1 ? String(o.first) : `${o.first}-${o.first + o.count - 1}`,
      `${formatDuration(o.ageMs ?? now.getTime() - Date.parse(o.since))} (since ${o.since})`,
    ]),
  );
}

function indent(lines: string[]): string[] {
  return lines.map((l) => `  ${l}`);
}
