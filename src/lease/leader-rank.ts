/**
 * How candidates rank for leadership: a newer app version first, then a higher priority. The
 * holder's rank is recorded with its epoch, so any candidate's read of the lease sees it.
 */
export interface LeaderRank {
  /** Numbers separated by dots, optionally `-<pre-release>`: `1.4.2`, `2.0.0-rc.1`. */
  version: string;
  /** A whole number, 0 (the default) to 1000. */
  priority: number;
}

export const VERSION_PATTERN = /^\d{1,9}(\.\d{1,9}){0,3}(-[0-9A-Za-z.-]{1,40})?$/;

/**
 * Compares two versions by their numbers (missing ones count as 0); a pre-release sorts below
 * the same numbers without one, and pre-releases compare as text. Negative when `a` is older.
 */
export function compareVersions(a: string, b: string): number {
  const [aNumbers = '', aPre] = splitOnce(a, '-');
  const [bNumbers = '', bPre] = splitOnce(b, '-');
  const an = aNumbers.split('.').map(Number);
  const bn = bNumbers.split('.').map(Number);
  for (let i = 0; i < Math.max(an.length, bn.length); i++) {
    const diff = (an[i] ?? 0) - (bn[i] ?? 0);
    if (diff !== 0) return Math.sign(diff);
  }
  if (aPre === undefined || bPre === undefined) return aPre === bPre ? 0 : aPre === undefined ? 1 : -1;
  return aPre < bPre ? -1 : aPre > bPre ? 1 : 0;
}

/** Negative when `a` ranks below `b`: version first, then priority. Equal ranks compare 0. */
export function compareRanks(a: LeaderRank, b: LeaderRank): number {
  return compareVersions(a.version, b.version) || Math.sign(a.priority - b.priority);
}

/** The rank as the lease record keeps it: `<version>;<priority>`. */
export function formatRank(rank: LeaderRank): string {
  return `${rank.version};${rank.priority}`;
}

/** A recorded rank, or undefined for one that is missing or damaged (it is for reading, not fencing). */
export function parseRank(raw: string | undefined): LeaderRank | undefined {
  if (!raw) return undefined;
  const [version, priority] = splitOnce(raw, ';');
  if (!version || !VERSION_PATTERN.test(version) || priority === undefined || !/^\d{1,4}$/.test(priority)) return undefined;
  return { version, priority: Number(priority) };
}

function splitOnce(text: string, separator: string): [string, string | undefined] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + 1)];
}
