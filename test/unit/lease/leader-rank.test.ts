import { describe, expect, it } from 'vitest';
import valid from 'semver/functions/valid';
import { compareRanks, compareVersions, formatRank, isVersion, parseRank } from '../../../src/lease/leader-rank';
import { resolveElectorOptions } from '../../../src/lease/elector-options';
import { InMemoryHandoverRequestStore } from '../../../src/lease/in-memory-handover-request-store';
import { InMemoryLeaseStore } from '../../../src/lease/in-memory-lease-store';

describe('leader rank', () => {
  it.each([
    ['1.0.0', '1.0.0', 0],
    ['1.0', '1.0.0', 0],
    ['1.2.0', '1.10.0', -1],
    ['2.0.0', '1.99.99', 1],
    ['2.0.0-rc.1', '2.0.0', -1],
    ['2.0.0-rc.1', '2.0.0-rc.2', -1],
    ['2.0.0-rc.1', '1.9.0', 1],
    ['10', '9.9', 1],
    // SemVer's precedence: numeric identifiers compare as numbers, build metadata is ignored.
    ['2.0.0-rc.10', '2.0.0-rc.9', 1],
    ['1.0.0-alpha', '1.0.0-alpha.1', -1],
    ['1.0.0-alpha.beta', '1.0.0-beta', -1],
    ['1.0.0-beta.11', '1.0.0-rc.1', -1],
    ['0.1.0+sha.5d1e', '0.1.0', 0],
    ['1.0.0-rc.1+b2', '1.0.0-rc.1+b1', 0],
    ['0.2.0+sha.5d1e', '0.1.9', 1],
    // Not a version (a damaged record): below every version.
    ['latest', '0.0.1', -1],
  ])('version %s against %s: %i', (a, b, sign) => {
    expect(compareVersions(a, b)).toBe(sign);
    expect(compareVersions(b, a)).toBe(-sign || 0);
  });

  // Plain versions skip semver at start-up; what they accept must be exactly what semver does.
  it.each([
    '0.0.0',
    '0.1.0',
    '1.4.2',
    '10.20.30',
    '999999999999999.0.1',
    '9999999999999999.0.1',
    '1.2.99999999999999999999',
    '01.2.3',
    '1.02.3',
    '1.2.03',
    '1.2.3.4',
    '1..3',
    ' 1.2.3',
    '1.2.3 ',
    'v1.2.3',
    '1.2.3-rc.1',
    '1.2.3+b.7',
  ])('version %j is one exactly when semver takes it', (version) => {
    expect(isVersion(version)).toBe(valid(version) !== null);
  });

  it.each([
    [{ version: '2.0.0', priority: 0 }, { version: '1.0.0', priority: 1000 }, 1],
    [{ version: '1.0.0', priority: 5 }, { version: '1.0.0', priority: 3 }, 1],
    [{ version: '1.0.0', priority: 3 }, { version: '1.0.0', priority: 3 }, 0],
  ])('rank %j against %j: %i (version first, then priority)', (a, b, sign) => {
    expect(compareRanks(a, b)).toBe(sign);
  });

  it.each([
    ['1.4.2;7', { version: '1.4.2', priority: 7 }],
    ['2.0.0-rc.1;0', { version: '2.0.0-rc.1', priority: 0 }],
    ['0.1.0+sha.5d1e;3', { version: '0.1.0+sha.5d1e', priority: 3 }],
    ['', undefined],
    ['1.4.2', undefined],
    ['v1;2', undefined],
    ['1.0;x', undefined],
  ])('reads the recorded rank %j as %j', (raw, rank) => {
    expect(parseRank(raw)).toEqual(rank);
    if (rank) expect(formatRank(rank)).toBe(raw);
  });

  it.each([
    [{ version: 'latest', priority: 0 }, 'rank.version'],
    [{ version: '1.2.3.4', priority: 0 }, 'rank.version'],
    [{ version: '1.02.3', priority: 0 }, 'rank.version'],
    [{ version: '1.0.0', priority: -1 }, 'rank.priority'],
    [{ version: '1.0.0', priority: 1.5 }, 'rank.priority'],
    [{ version: '1.0.0', priority: 1001 }, 'rank.priority'],
  ])('the elector refuses rank %j, naming %s', (rank, option) => {
    expect(() => resolveElectorOptions({ store: new InMemoryLeaseStore(), rank })).toThrow(
      expect.objectContaining({ code: 'InvalidConfig', option }),
    );
    expect(() => resolveElectorOptions({ store: new InMemoryLeaseStore(), rank })).toThrow(new RegExp(`^${option} must be`));
  });

  it('the elector refuses a rank without a handover request store, naming requests', () => {
    const rank = { version: '1.0.0', priority: 0 };
    expect(() => resolveElectorOptions({ store: new InMemoryLeaseStore(), rank })).toThrow(
      expect.objectContaining({ code: 'InvalidConfig', option: 'requests' }),
    );
    expect(() => resolveElectorOptions({ store: new InMemoryLeaseStore(), rank })).toThrow(/^requests is required with a rank/);
    const requests = new InMemoryHandoverRequestStore();
    expect(resolveElectorOptions({ store: new InMemoryLeaseStore(), rank, requests }).requests).toBe(requests);
  });
});
