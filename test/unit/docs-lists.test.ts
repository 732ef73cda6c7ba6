import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

// Lists the docs keep of what the code defines, read from both and compared: a new event, option,
// error code or setting fails here until its page names it.
const root = join(__dirname, '..', '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** The body of `export <kind> <name> … {` or `= …;` in a source file, to its end at column 0. */
function declaration(file: string, head: string): string {
  const text = read(file);
  const start = text.indexOf(head);
  if (start < 0) throw new Error(`${file} no longer declares ${head}`);
  const end = text.slice(start).search(/\n(\}|[^\s|])/);
  return text.slice(start, end < 0 ? text.length : start + end + 2);
}

/** A doc's section: from its heading to the next heading of the same or a higher level. */
function section(file: string, heading: string): string {
  const text = read(file);
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${file} has no section ${heading}`);
  const level = heading.split(' ')[0]!;
  const next = text.slice(start + heading.length + 2).search(new RegExp(`\\n#{1,${level.length}} `));
  return text.slice(start, next < 0 ? undefined : start + heading.length + 2 + next);
}

const named = (text: string, name: string) => text.includes(`\`${name}\``);

const cases: { what: string; names: () => string[]; doc: string; where: () => string }[] = [
  {
    what: 'error codes',
    names: () => [...declaration('src/errors.ts', 'export type BatonErrorCode').matchAll(/\| '(\w+)'/g)].map((m) => m[1]!),
    doc: 'docs/election.md › Errors',
    where: () => section('docs/election.md', '## Errors'),
  },
  {
    what: 'leader events',
    names: () =>
      [...declaration('src/lease/leader-events.ts', 'export type LeaderEvent').matchAll(/type: '([a-z-]+)'/g)].map((m) => m[1]!),
    doc: 'docs/settings.md › LeaderElector options',
    where: () => section('docs/settings.md', '## `LeaderElector` options'),
  },
  {
    what: 'elector options',
    names: () =>
      [...declaration('src/lease/elector-options.ts', 'export interface LeaderElectorOptions').matchAll(/^  (\w+)\??:/gm)].map(
        (m) => m[1]!,
      ),
    doc: 'docs/settings.md › LeaderElector options',
    where: () => section('docs/settings.md', '## `LeaderElector` options'),
  },
  {
    what: 'app settings',
    names: () => {
      const files = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
      const settings = files.flatMap((f) => [...read(join('src', f)).matchAll(/'(BATON_[A-Z0-9_]+)'/g)].map((m) => m[1]!));
      // The chaos soak's switch that turns fencing off is documented with the soak, never as a setting.
      return [...new Set(settings)].filter((name) => name !== 'BATON_UNSAFE_DISABLE_FENCING').sort();
    },
    doc: 'docs/settings.md',
    where: () => read('docs/settings.md'),
  },
];

describe('the reference pages name everything the code defines', () => {
  it.each(cases)('$what, in $doc', ({ names, where }) => {
    const listed = names();
    expect(listed.length).toBeGreaterThan(0);
    const page = where();
    expect(listed.filter((name) => !named(page, name))).toEqual([]);
  });
});

describe('the reference pages', () => {
  it('stay a reference a reader gets through: 120 KB at most', () => {
    const pages = readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md'));
    const bytes = pages.reduce((sum, name) => sum + Buffer.byteLength(read(`docs/${name}`)), 0);
    expect(pages.length).toBeGreaterThan(0);
    expect(bytes).toBeLessThanOrEqual(120_000);
  });
});
