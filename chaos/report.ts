import { DRAIN_RULE } from '../src/local/stop-rules';
import type { HostStop } from './chaos-instances';
import type { FaultTarget } from './fault-effects';
import { INVARIANTS, type CheckResult } from './invariants';
import type { SoakReport } from './soak';

/** The soak's summary: faults injected by kind, runs checked, and each violation with its evidence. */
export function formatSoakReport(report: SoakReport): string {
  const lines: string[] = [];
  lines.push('', 'faults injected', '| kind | count |', '|---|---|');
  for (const [kind, count] of Object.entries(report.faults))
    if (report.kinds.includes(kind as never)) lines.push(`| ${kind} | ${count} |`);
  if (report.targets.length) {
    lines.push('', 'what the aimed faults hit');
    for (const target of report.targets) lines.push(`- ${describeTarget(target, report)}`);
  }
  const p = report.proxy;
  lines.push(
    '',
    `proxy: ${p.forwarded} requests forwarded; disturbed: ${p.latency} delayed, ${p.unavailable} answered 503, ` +
      `${p.resetBefore} reset before storage, ${p.resetAfter} reset after storage applied them, ${p.refused} refused while storage was down, ` +
      `${p.outage} answered 500 for an unavailable run record`,
    ...formatStops(report.stops),
    `leadership changed hands ${report.leaderChanges} times; faults ran ${(report.faultMs / 1000).toFixed(0)} s; ` +
      `every run had ended ${(report.settleMs / 1000).toFixed(1)} s after the faults stopped`,
  );
  lines.push(...formatCheck(report.check));
  lines.push(
    '',
    `seed ${report.seed}; ${report.queueShards} queue shard(s); data ${report.kept ? `kept in ${report.data}` : 'removed'}`,
  );
  return lines.join('\n');
}

function describeTarget(target: FaultTarget, report: SoakReport): string {
  const ended = (run: string): string => {
    const r = report.targetRuns[run];
    if (!r) return 'it has no run record';
    const why = [r.endReason && `reason: ${r.endReason}`, r.finalizeError && `finalize error: ${r.finalizeError}`].filter(
      Boolean,
    );
    return `it ended ${r.state}${why.length ? ` (${why.join('; ')})` : ''}`;
  };
  const seconds = (ms: number | undefined) => (ms === undefined ? '?' : `${(ms / 1000).toFixed(1)} s`);
  switch (target.kind) {
    case 'bare-sigterm': {
      const stop = report.stops.find((s) => s.instance === target.instance && s.kind === 'sigterm');
      return `bare-sigterm: ${target.instance}${target.leader ? ' (the leader)' : ''}; ${stop ? describeStop(stop) : 'no record of its stop'}`;
    }
    case 'drain-abort': {
      const stop = report.stops.find((s) => s.instance === target.instance && s.kind === 'drain');
      const near = target.messages.filter((m) => m.heldForMs <= DRAIN_RULE.nearMs);
      const back = target.messages.filter((m) => m.takenBy !== undefined);
      const ranOn = back.filter((m) => m.ranOn);
      const first = (m: { run: string; first: number; count: number }) => `${m.run} items ${m.first}..${m.first + m.count - 1}`;
      return (
        `drain-abort: ${target.instance}${target.leader ? ' (the leader)' : ''}, holding ${target.messages.length} message(s), ` +
        `${near.length} taken up within ${DRAIN_RULE.nearMs / 1000} s of the drain; ` +
        `the host aborted ${target.aborted} invocation(s); ${back.length} message(s) came back before their code there settled, ` +
        `${ranOn.length} while it ran on` +
        (ranOn.length
          ? ` (${ranOn.map((m) => `${first(m)} to ${m.takenBy} after ${seconds(m.takenAfterMs)}`).join(', ')})`
          : '') +
        `; ${stop ? describeStop(stop) : 'no record of its stop'}; ` +
        target.runs.map((run) => `${run}: ${ended(run)}`).join('; ')
      );
    }
    case 'unreadable-record':
      return (
        `unreadable-record: ${target.run} for ${((target.to - target.from) / 1000).toFixed(0)} s; ${target.refused} requests answered 500, ` +
        `the leader set its messages aside ${target.setAside} times and retried a failed step ${target.stepErrors} times; ` +
        ended(target.run)
      );
    case 'worker-death':
      return (
        `worker-death: ${target.instance} died after sending the result of ${target.run} items ${target.first}..` +
        `${target.first + target.count - 1} (delivery ${target.dequeueCount}); ${ended(target.run)}`
      );
    case 'hung-hook':
      return (
        `hung-hook: ${target.hook}${target.item === undefined ? '' : ` of item ${target.item}`} of ${target.run}` +
        `${target.started ? '' : ' (the occurrence did not start)'}; ${ended(target.run)}`
      );
    case 'lease-delete':
      return `lease-delete: the lease ${target.target} deleted under ${target.holder}`;
    case 'keyed-trigger':
      return (
        `keyed-trigger: ${target.requests} triggers with key ${target.key} from ${target.clients} clients named ` +
        `${target.runs.length === 1 ? `one run; ${ended(target.runs[0] as string)}` : `${target.runs.length} runs: ${target.runs.join(', ')}`}`
      );
    case 'rolling-deploy':
      return (
        `rolling-deploy: ${target.from} → ${target.version}; ` +
        (target.takeoverAt === null
          ? 'the new version never led while the old ones ran'
          : `the new version led ${target.takeoverAt - target.startedAt} ms after its first instance started`)
      );
    case 'frozen-timer':
      return `frozen-timer: every timer off for ${((target.to - target.from) / 1000).toFixed(0)} s`;
    case 'straggler': {
      const held = target.held.map((m) => `${m.run} items ${m.first}..${m.first + m.count - 1}`).join(', ');
      return (
        `straggler: ${target.instance} stopped for ${((target.resumedAt - target.stoppedAt) / 1000).toFixed(0)} s holding ${held}; ` +
        target.runs.map((run) => `${run}: ${ended(run)}`).join('; ')
      );
    }
  }
}

/** One stop by the host's rules: how the instance's own stop went, and how its process ended. */
function describeStop(stop: HostStop): string {
  const parts: string[] = [];
  if (stop.drainedAt !== undefined) parts.push(`drained after ${((stop.drainedAt - stop.from) / 1000).toFixed(1)} s`);
  if (stop.stop) {
    const ms = stop.stop.durationMs;
    parts.push(
      `its stop (${stop.stop.path}) had the lease ${stop.stop.lease}${ms === undefined ? '' : ` in ${Math.round(ms)} ms`}`,
    );
  } else parts.push('it recorded no stop');
  parts.push(
    `it ${exitOf(stop)} ${((stop.to - stop.from) / 1000).toFixed(1)} s after the ${stop.kind === 'drain' ? 'drain' : stop.kind === 'terminate' ? 'WorkerTerminate' : 'signal'}`,
  );
  return parts.join(', ');
}

function exitOf(stop: HostStop): string {
  if (!stop.exit) return 'exited';
  return stop.exit.signal ? `exited by ${stop.exit.signal}` : `exited with code ${stop.exit.code}`;
}

/**
 * The stops the soak made by the host's rules, by kind: how each instance's own stop went (the
 * hook or the signal, and its lease), and how many the host killed at 5 s. Empty without any.
 */
export function formatStops(stops: readonly HostStop[]): string[] {
  if (stops.length === 0) return [];
  const names: Record<HostStop['kind'], string> = {
    terminate: 'WorkerTerminate',
    sigterm: 'bare SIGTERM',
    drain: 'drain, then SIGTERM',
    sigkill: 'SIGKILL',
  };
  const lines = ['', "instance stops by the host's rules"];
  for (const kind of Object.keys(names) as Array<HostStop['kind']>) {
    const of = stops.filter((s) => s.kind === kind);
    if (of.length === 0) continue;
    const count = (values: string[]) =>
      Object.entries(values.reduce<Record<string, number>>((n, v) => ({ ...n, [v]: (n[v] ?? 0) + 1 }), {}))
        .map(([v, n]) => `${n} ${v}`)
        .join(', ');
    const leases = count(of.map((s) => (s.stop ? `${s.stop.path}/${s.stop.lease}` : 'no stop recorded')));
    const exits = count(of.map((s) => exitOf(s).replace(/^exited /, '')));
    const slowest = Math.max(...of.map((s) => s.stop?.durationMs ?? 0));
    lines.push(`- ${names[kind]}: ${of.length}; lease: ${leases}; exit: ${exits}; slowest stop ${Math.round(slowest)} ms`);
  }
  return lines;
}

export function formatCheck(check: CheckResult): string[] {
  const lines: string[] = [''];
  const states = Object.entries(check.states)
    .map(([state, n]) => `${n} ${state}`)
    .join(', ');
  lines.push(`runs checked: ${check.runsChecked}${states ? ` (${states})` : ''}`);
  if (check.audit) {
    lines.push(
      `audit trail: ${check.audit.writes} blob writes to ${check.audit.documents} documents; ${check.audit.accepted} accepted, ` +
        `${check.audit.refused} refused by a version check`,
    );
  }
  if (check.occurrences) {
    const o = check.occurrences;
    lines.push(
      `occurrences due while the faults ran: ${o.due}; ${o.onTime} started within the SIGKILL bound, ` +
        `${o.lateButExplained} later but within it of a fault's end, ${o.skipped} skipped (overlap), ${o.missed} missed during a fault` +
        (o.unchecked ? `, ${o.unchecked} not run and past the job states' recent events` : ''),
    );
    for (const [job, j] of Object.entries(o.jobs ?? {})) {
      lines.push(
        `- ${job} (${j.timeZone}${j.jitterSeconds ? `, jitter ${j.jitterSeconds} s` : ''}): ${j.due} due; ${j.onTime} on time, ` +
          `${j.lateButExplained} late after a fault, ${j.skipped} skipped, ${j.missed} missed` +
          (j.unchecked ? `, ${j.unchecked} unchecked` : ''),
      );
    }
  }
  for (const t of check.stragglers ?? []) {
    const s = (ms: number | null) => (ms === null ? '?' : `${(ms / 1000).toFixed(1)} s`);
    lines.push(
      `straggler: ${t.run} took ${s(t.makespanMs)} (bound ${s(t.boundMs)}: twice the median of ${t.cleanRuns} clean run(s), ` +
        `${s(t.cleanMs)}, and a hedge wait of ${s(t.hedgeWaitMs)}); it ended ${s(t.endedBeforeResumeMs)} before ${t.instance} ` +
        `came back from ${s(t.stoppedMs)} stopped; ${t.hedges} copies sent, ${t.duplicates} duplicates`,
    );
  }
  lines.push('', '| invariant | violations |', '|---|---|');
  for (const [rule, text] of Object.entries(INVARIANTS)) {
    lines.push(`| ${text} | ${check.violations.filter((v) => v.rule === rule).length} |`);
  }
  lines.push('', `violations: ${check.violations.length}`);
  for (const v of check.violations.slice(0, 50)) lines.push(`  ${v.rule}: ${v.subject}: ${v.evidence}`);
  if (check.violations.length > 50) lines.push(`  … and ${check.violations.length - 50} more (see report.json)`);
  for (const note of check.notes) lines.push(`note: ${note}`);
  return lines;
}
