import { INVARIANTS, type CheckResult } from './invariants';
import type { SoakReport } from './soak';

/** The soak's summary: faults injected by kind, runs checked, and each violation with its evidence. */
export function formatSoakReport(report: SoakReport): string {
  const lines: string[] = [];
  lines.push('', 'faults injected', '| kind | count |', '|---|---|');
  for (const [kind, count] of Object.entries(report.faults))
    if (report.kinds.includes(kind as never)) lines.push(`| ${kind} | ${count} |`);
  const p = report.proxy;
  lines.push(
    '',
    `proxy: ${p.forwarded} requests forwarded; disturbed: ${p.latency} delayed, ${p.unavailable} answered 503, ` +
      `${p.resetBefore} reset before storage, ${p.resetAfter} reset after storage applied them, ${p.refused} refused while storage was down`,
    `leadership changed hands ${report.leaderChanges} times; faults ran ${(report.faultMs / 1000).toFixed(0)} s; ` +
      `every run had ended ${(report.settleMs / 1000).toFixed(1)} s after the faults stopped`,
  );
  lines.push(...formatCheck(report.check));
  lines.push('', `seed ${report.seed}; data ${report.kept ? `kept in ${report.data}` : 'removed'}`);
  return lines.join('\n');
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
