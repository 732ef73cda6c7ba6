// The published package's code: the public entries, the CLI and the local host's instance
// process, compiled from src/ into two CommonJS files beside a small file per entry that takes its
// part: dist/bundle/baton.js holds what an app loads (the root, `functions` and `election`
// entries), dist/bundle/baton-tools.js the rest (`testing`, the CLI and the local host).
//
// Why bundled: on Flex Consumption every cold start loads the package anew, and loading ~120
// compiled modules and zod's ~300 files one by one cost a Functions app ~120 ms before its
// registrations were done (bench/benchmarks/footprint.ts). A file is read and compiled once, and
// zod is cut to what Baton calls.
//
// Why two files: V8 compiles every byte of a file it loads, used or not, about 18 ms a megabyte
// on these machines; the CLI, the local host and the testing kit are a fifth of the code, and a
// deployed app never runs them.
//
// Why one copy of each module all the same: a class must have one identity whichever entry it
// came through, or `instanceof InvalidConfigError` fails on an error that `runJobOnce` threw, and
// the local host and the app it runs share one copy. So baton-tools.js bundles only modules that
// baton.js does not hold, and takes every other from baton.js's `modules` table. Each entry's part
// and each module in the table is a getter, so a process evaluates only the modules it uses.
//
// What stays outside: every package with process-wide state or the app's own copy (the Azure
// SDKs, OpenTelemetry, durable-functions, azurite, commander) is required as it is installed.
// Inlined are only pure libraries: zod, croner and semver.
import { build } from 'esbuild';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'bundle');

/** A package entry's file hands on its part as it is. */
const library = (source) => ({ source, file: (part) => `module.exports = ${part};` });

/** The bundled files, and for each the files in dist/bundle that take a part of it. */
const BUNDLES = {
  baton: {
    index: library('src/index'),
    functions: library('src/functions'),
    election: library('src/election'),
  },
  'baton-tools': {
    testing: library('src/testing'),
    // The `bin`.
    cli: { source: 'src/cli/main', file: (part) => `${part}.runCli();`, shebang: true },
    // What the local host spawns per instance (`src/local/cluster.ts` looks for it beside itself);
    // the module runs the instance as it is loaded.
    'instance-main': { source: 'src/local/instance-main', file: (part) => `${part};` },
  },
};
const INLINED = ['zod', 'croner', 'semver'];

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const installed = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})];
const external = installed.filter((name) => !INLINED.includes(name)).flatMap((name) => [name, `${name}/*`]);

const key = (name) => JSON.stringify(name);
/** A module's name in the table: its path from the root, as esbuild's metafile names it. */
const moduleName = (path) => relative(root, path).split(sep).join('/');

/**
 * A bundle's source. The tools' bundle has a getter per entry (esbuild turns each `require` of an
 * ES module into a lazy initializer), since a process runs one of them. The app's bundle imports
 * its entries, so esbuild hoists every module into one scope that runs as the file loads: an app
 * runs all of them at start anyway, and this way V8 parses each module's top level once, not once
 * to skip it and again to run it. Its `modules` table names the modules the tools' bundle takes.
 */
function entries(bundle, modules = []) {
  const parts = Object.entries(BUNDLES[bundle]);
  if (bundle === 'baton-tools') {
    const getters = parts.map(([entry, { source }]) => `  get ${key(entry)}() { return require(${key(`./${source}`)}); },`);
    return `module.exports = {\n${getters.join('\n')}\n};\n`;
  }
  const imports = [
    ...parts.map(([entry, { source }], i) => `import * as entry${i} from ${key(`./${source}`)};`),
    ...modules.map((name, i) => `import * as module${i} from ${key(`./${name}`)};`),
  ];
  const exported = parts.map(([entry], i) => `export { entry${i} as ${entry} };`);
  const table = modules.map((name, i) => `  ${key(name)}: module${i},`);
  return `${imports.join('\n')}\n${exported.join('\n')}\nexport const modules = {\n${table.join('\n')}\n};\n`;
}

/** Takes each module `from` holds from its `modules` table, and notes which were taken. */
function takeFrom(from, held, taken) {
  return {
    name: 'take-from-bundle',
    setup(builder) {
      builder.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData?.resolving || args.kind === 'entry-point') return undefined;
        if (args.namespace === 'held') return { path: args.path, external: true };
        const resolved = await builder.resolve(args.path, {
          importer: args.importer,
          resolveDir: args.resolveDir,
          kind: args.kind,
          pluginData: { resolving: true },
        });
        if (resolved.errors.length > 0 || resolved.external) return undefined;
        const name = moduleName(resolved.path);
        if (!held.has(name)) return undefined;
        taken.add(name);
        return { path: name, namespace: 'held' };
      });
      builder.onLoad({ filter: /.*/, namespace: 'held' }, (args) => ({
        contents: `module.exports = require(${key(`./${from}.js`)}).modules[${key(args.path)}];`,
        loader: 'js',
      }));
    },
  };
}

const options = (bundle, contents, plugins = []) => ({
  stdin: { contents, resolveDir: root, sourcefile: `${bundle}-entries.${bundle === 'baton' ? 'mjs' : 'cjs'}`, loader: 'js' },
  absWorkingDir: root,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node22',
  // ES module builds, so zod is tree-shaken to what Baton calls.
  mainFields: ['module', 'main'],
  external,
  // No `keepNames`: its wrapper around each of some 800 functions and classes cost an app's start
  // about 2 ms. Names stay as written, since identifiers are not minified; only a clash between
  // two modules renames one, and for a class that would lie (errors name themselves by
  // `new.target.name`), so the build refuses a renamed class below.
  tsconfig: join(root, 'tsconfig.build.json'),
  outfile: join(out, `${bundle}.js`),
  logLevel: 'warning',
  legalComments: 'eof',
  // Whitespace and syntax only, so names stay in stack traces: V8 reads every byte as it compiles
  // the file, and a third fewer bytes start an app about 1.5 ms sooner. NO_MINIFY=1 keeps a
  // module's name above its code, for reading a profile.
  minifyWhitespace: process.env.NO_MINIFY !== '1',
  minifySyntax: process.env.NO_MINIFY !== '1',
  plugins,
});

/** Every class src/ declares, to tell a class esbuild renamed from one whose name ends in a digit. */
function declaredClasses(dir) {
  const names = new Set();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const source = readFileSync(join(entry.parentPath, entry.name), 'utf8');
    for (const m of source.matchAll(/\bclass ([A-Za-z_$][\w$]*)/g)) names.add(m[1]);
  }
  return names;
}
const classNames = declaredClasses(join(root, 'src'));

mkdirSync(out, { recursive: true });
// What the app's bundle holds, then the tools' bundle without it, then the app's bundle again
// with the table of what the tools took.
const app = await build({ ...options('baton', entries('baton')), write: false, metafile: true });
const held = new Set(Object.keys(app.metafile.inputs));
const taken = new Set();
const tools = await build({
  ...options('baton-tools', entries('baton-tools'), [takeFrom('baton', held, taken)]),
  metafile: true,
});
await build(options('baton', entries('baton', [...taken].sort())));
// Every file either bundle compiled in (not its entries, nor what the tools take from baton.js).
const inputs = [...held, ...Object.keys(tools.metafile.inputs)].filter((name) => existsSync(join(root, name)));
const written = inputs.map((name) => readFileSync(join(root, name), 'utf8')).join('\n');

/**
 * Each class under the name it was written with. esbuild writes a module's class as
 * `var Name = class _Name {` when its body names it, and `.name` (what an error names itself by)
 * and a stack trace's frames then read `_Name`; the inner name is given back, as no source uses
 * it. A clash between two modules would rename a class `Name2`: that the build refuses.
 */
function namesAsWritten(bundle, code) {
  let named = code;
  for (const [, name] of code.matchAll(/\b([A-Za-z_$][\w$]*) ?= ?class _\1\b/g)) {
    if (new RegExp(`\\b_${name.replace('$', '\\$')}\\b`).test(written)) {
      throw new Error(`${bundle}.js: cannot name class ${name} as written, since a source uses _${name}`);
    }
    named = named.replace(new RegExp(`(?<![\\w$])_${name.replace('$', '\\$')}(?![\\w$])`, 'g'), name);
  }
  const renamed = [...named.matchAll(/\bclass ([A-Za-z_$][\w$]*?)\d+\b|\b([A-Za-z_$][\w$]*?)\d+ ?= ?class\b/g)]
    .map((m) => m[1] ?? m[2])
    .filter((name) => classNames.has(name));
  if (renamed.length > 0) {
    throw new Error(`${bundle}.js renames class ${renamed.join(', ')} (a clash between modules): rename one of them in src/`);
  }
  return named;
}

// ASCII only: one character past it anywhere (esbuild escapes strings, but keeps some comments as
// written) makes Node decode the whole file as UTF-16 on every start, ~1 ms. In a comment, the
// escape reads the same.
for (const bundle of Object.keys(BUNDLES)) {
  const bundled = join(out, `${bundle}.js`);
  const code = namesAsWritten(bundle, readFileSync(bundled, 'utf8'));
  writeFileSync(
    bundled,
    code.replace(/[^\0-\x7f]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`),
  );
  for (const [entry, { file, shebang }] of Object.entries(BUNDLES[bundle])) {
    const body = `'use strict';\n${file(`require('./${bundle}.js')[${key(entry)}]`)}\n`;
    writeFileSync(join(out, `${entry}.js`), shebang ? `#!/usr/bin/env node\n${body}` : body, { mode: shebang ? 0o755 : 0o644 });
  }
}
