import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { apiReports, ENTRIES, ROOT } from '../../build/api-report.mjs';

// `npm test` builds first: these read the entries' declarations in dist/src.
describe('the public API', () => {
  const scratch = join(ROOT, 'dist', 'api-check');
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  const results = apiReports();

  it('is what the committed reports in api/ say, entry by entry', () => {
    expect(results.map((r) => r.entry)).toEqual(ENTRIES);
    for (const { entry, changed, problems } of results) {
      expect(problems, entry).toEqual([]);
      expect(changed, `${entry}: its API differs from api/${entry}.api.md; review it, then run npm run api`).toBe(false);
    }
  });

  // Names a public type reaches that no entry exports: a user sees them and cannot import them.
  it('reaches no internal name', () => {
    expect(Object.fromEntries(results.map(({ entry, internal }) => [entry, internal]))).toEqual({
      index: [],
      functions: [],
      election: [],
      testing: [],
    });
  });

  it('fails the check for an entry whose exports change, and only for that entry', () => {
    // A copy of the declarations inside the project, so their imports resolve as dist/src's do.
    mkdirSync(scratch, { recursive: true });
    const types = mkdtempSync(join(scratch, 'types-'));
    cpSync(join(ROOT, 'dist', 'src'), types, { recursive: true, filter: (from) => !from.endsWith('.js') });
    const index = join(types, 'index.d.ts');
    writeFileSync(index, `${readFileSync(index, 'utf8')}\nexport declare function addedByMistake(): void;\n`);
    const results = apiReports({ typesDir: types, entries: ['index', 'functions'] });
    expect(results.map(({ entry, changed }) => [entry, changed])).toEqual([
      ['index', true],
      ['functions', false],
    ]);
  });
});
