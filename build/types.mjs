// The published package's types: the declarations the four public entries reach, copied from
// dist/src (which tsc fills with one per module of src/) to dist/types, in the same folders.
//
// Why: the code ships bundled, so a module no entry's types name is never seen by a user's
// compiler; about half of src/ (the CLI, the local host, the engines' insides) is such. Shipping
// their declarations cost every install some 90 files for nothing.
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const from = join(root, 'dist', 'src');
const to = join(root, 'dist', 'types');
const ENTRIES = ['index', 'functions', 'election', 'testing'];

/** The declaration a relative specifier in `file` names: `./x.js` is `./x.d.ts` or `./x/index.d.ts`. */
function resolveDeclaration(file, specifier) {
  const base = join(dirname(file), specifier.replace(/\.js$/, ''));
  for (const candidate of [`${base}.d.ts`, join(base, 'index.d.ts')]) if (existsSync(candidate)) return candidate;
  throw new Error(`${relative(root, file)} imports ${specifier}, which has no declaration in dist/src: build with tsc first`);
}

const reached = new Set();
const queue = ENTRIES.map((entry) => join(from, `${entry}.d.ts`));
while (queue.length > 0) {
  const file = queue.pop();
  if (reached.has(file)) continue;
  reached.add(file);
  const text = readFileSync(file, 'utf8');
  for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)(['"])(\.{1,2}\/[^'"]+)\1/g)) {
    queue.push(resolveDeclaration(file, match[2]));
  }
}

rmSync(to, { recursive: true, force: true });
for (const file of reached) {
  const target = join(to, relative(from, file));
  mkdirSync(dirname(target), { recursive: true });
  cpSync(file, target);
}
