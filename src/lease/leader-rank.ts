// The two functions alone, and on first use: the whole package cost every cold start about
// 10 ms, and even these two build semver's regular expressions (about 1 ms) for a start that
// ranks nothing until its first tick.
const valid = (version: string): string | null =>
  (require('semver/functions/valid') as typeof import('semver/functions/valid'))(version);
const compare = (a: string, b: string): number =>
  (require('semver/functions/compare') as typeof import('semver/functions/compare'))(a, b);

/**
 * How candidates rank for leadership: a newer app version first, then a higher priority. The
 * holder's rank is recorded with its epoch, so any candidate's read of the lease sees it.
 */
export interface LeaderRank {
  /**
   * A SemVer version (`1.4.2`, `2.0.0-rc.10`, `0.1.0+sha.5d1e`); `1` and `1.4` stand for `1.0.0`
   * and `1.4.0`. Build metadata is kept and ignored for ranking, as SemVer says.
   */
  version: string;
  /** A whole number, 0 (the default) to 1000. */
  priority: number;
}

/** Longest version kept: it travels in lease metadata with the holder's name. */
const MAX_VERSION_LENGTH = 100;

/** Three numbers without leading zeros, each short enough to be a safe integer, as semver requires. */
const PLAIN_VERSION = /^(?:0|[1-9]\d{0,14})\.(?:0|[1-9]\d{0,14})\.(?:0|[1-9]\d{0,14})$/;

/** The version as full SemVer (`1.4` → `1.4.0`), or undefined when it is not one. */
function semverOf(version: string): string | undefined {
  if (typeof version !== 'string' || version.length > MAX_VERSION_LENGTH) return undefined;
  const core = /^[^-+]*/.exec(version)![0];
  const numbers = core.split('.');
  const padded =
    numbers.length < 3 && numbers.every((n) => /^(0|[1-9]\d*)$/.test(n))
      ? [...numbers, '0', '0'].slice(0, 3).join('.') + version.slice(core.length)
      : version;
  // A plain `1.4.2` (every elector checks its own version at start-up) is valid SemVer as it
  // stands, so a cold start need not build semver's expressions; anything else semver decides.
  if (PLAIN_VERSION.test(padded)) return padded;
  return valid(padded) ?? undefined;
}

/** Whether `version` is one a rank may carry. */
export function isVersion(version: string): boolean {
  return semverOf(version) !== undefined;
}

/**
 * Compares two versions by SemVer precedence: numbers first, a pre-release below the same numbers
 * without one, pre-release identifiers numerically when they are numbers (`rc.9` < `rc.10`), build
 * metadata ignored. Negative when `a` is older. A value that is not a version sorts below every
 * version (a damaged record ranks lowest, rather than stopping an election).
 */
export function compareVersions(a: string, b: string): number {
  const [sa, sb] = [semverOf(a), semverOf(b)];
  if (sa === undefined || sb === undefined) return sa === sb ? 0 : sa === undefined ? -1 : 1;
  return compare(sa, sb);
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
  if (!version || !isVersion(version) || priority === undefined || !/^\d{1,4}$/.test(priority)) return undefined;
  return { version, priority: Number(priority) };
}

function splitOnce(text: string, separator: string): [string, string | undefined] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + 1)];
}
