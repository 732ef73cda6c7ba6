// The published package's code: the public entries, the CLI and the local host's instance
// process, compiled from src/ into CommonJS files beside a small file per entry that takes its
// part: dist/bundle/baton.js holds what an app loads at start (the root, `functions` and
// `election` entries), three files what it loads on first use, and dist/bundle/baton-tools.js the
// rest (`testing`, the CLI and the local host).
//
// Why bundled: on Flex Consumption every cold start loads the package anew, and loading ~120
// compiled modules and zod's ~300 files one by one cost a Functions app ~120 ms before its
// registrations were done (bench/benchmarks/footprint.ts). A file is read and compiled once, and
// zod is cut to what Baton calls.
//
// Why a file for the tools: V8 compiles every byte of a file it loads, used or not, about 18 ms a megabyte
// on these machines; the CLI, the local host and the testing kit are a fifth of the code, and a
// deployed app never runs them.
//
// Why files an app loads later: what an instance may never use is not compiled at every start.
// The durable engine's registrations (BATON_ENGINE=durable apps only), the HTTP API's and
// status page's handlers (on their first request) and the coordinator (when the instance first
// leads; followers and instances scaled out for queue load never do) are each a file of their
// own; baton.js holds a stand-in for each, whose functions load the file on their first call.
//
// Why one copy of each module all the same: a class must have one identity whichever entry it
// came through, or `instanceof InvalidConfigError` fails on an error that `runJobOnce` threw, and
// the local host and the app it runs share one copy. So every file bundles only modules that
// baton.js does not hold, and takes every other from baton.js's `modules` table (the tools' file
// takes the later-loaded files' modules from theirs the same way). Each entry's part
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

/**
 * The files an app loads on first use, each one module and what only it needs. A module here
 * exports functions only: its stand-in in baton.js forwards each call.
 */
const LATER = {
  // Registered at start, by apps on the durable engine only.
  'baton-durable': 'src/app/durable-registrations.ts',
  // Built on the first request to any route.
  'baton-http': 'src/app/http-handlers.ts',
  // Built when the instance first leads: a follower never runs it.
  'baton-leader': 'src/engine/leader-engine.ts',
};

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const installed = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})];
const external = installed.filter((name) => !INLINED.includes(name)).flatMap((name) => [name, `${name}/*`]);

const key = (name) => JSON.stringify(name);
/** A module's name in the table: its path from the root, as esbuild's metafile names it. */
const moduleName = (path) => relative(root, path).split(sep).join('/');

/**
 * A bundle's source. The tools' bundle has a getter per entry (esbuild turns each `require` of an
 * ES module into a lazy initializer), since a process runs one of them. The others import their
 * entries, so esbuild hoists every module into one scope that runs as the file loads: an app
 * runs all of them at start anyway, and this way V8 parses each module's top level once, not once
 * to skip it and again to run it. Their `modules` table names the modules other bundles take.
 */
function entries(bundle, modules = []) {
  if (bundle === 'baton-tools') {
    const getters = Object.entries(BUNDLES[bundle]).map(
      ([entry, { source }]) => `  get ${key(entry)}() { return require(${key(`./${source}`)}); },`,
    );
    return `module.exports = {\n${getters.join('\n')}\n};\n`;
  }
  const parts = bundle in LATER ? [] : Object.entries(BUNDLES[bundle]);
  const imports = [
    ...(bundle in LATER ? [`export * from ${key(`./${LATER[bundle]}`)};`] : []),
    ...parts.map(([, { source }], i) => `import * as entry${i} from ${key(`./${source}`)};`),
    ...modules.map((name, i) => `import * as module${i} from ${key(`./${name}`)};`),
  ];
  const exported = parts.map(([entry], i) => `export { entry${i} as ${entry} };`);
  const table = modules.map((name, i) => `  ${key(name)}: module${i},`);
  return `${imports.join('\n')}\n${exported.join('\n')}\nexport const modules = {\n${table.join('\n')}\n};\n`;
}

/** What each later-loaded module exports, all functions (its stand-in forwards calls). */
async function laterExports() {
  const exports = new Map();
  for (const [bundle, source] of Object.entries(LATER)) {
    const result = await build({
      entryPoints: [join(root, source)],
      bundle: false,
      write: false,
      metafile: true,
      format: 'esm',
      outdir: out,
    });
    const names = Object.values(result.metafile.outputs).flatMap((output) => output.exports);
    const code = readFileSync(join(root, source), 'utf8');
    const notFunctions = names.filter((name) => !new RegExp(`export (?:async )?function\\*? ?${name}\\b`).test(code));
    if (notFunctions.length > 0) {
      throw new Error(`${source} is loaded later, so it may export functions only, not ${notFunctions.join(', ')}`);
    }
    exports.set(moduleName(join(root, source)), { bundle, names });
  }
  return exports;
}

/**
 * Links a bundle to the others. A module that a bundle in `from` holds is taken from that
 * bundle's `modules` table (and noted in `taken`, by bundle); a later-loaded module is replaced
 * by its stand-in, unless this is its own bundle.
 */
function linker({ self, from = [], later, taken }) {
  return {
    name: 'link-bundles',
    setup(builder) {
      builder.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData?.resolving || args.kind === 'entry-point') return undefined;
        if (args.namespace === 'held' || args.namespace === 'later') return { path: args.path, external: true };
        const resolved = await builder.resolve(args.path, {
          importer: args.importer,
          resolveDir: args.resolveDir,
          kind: args.kind,
          pluginData: { resolving: true },
        });
        if (resolved.errors.length > 0 || resolved.external) return undefined;
        const name = moduleName(resolved.path);
        const holder = from.find(({ held }) => held.has(name));
        if (holder) {
          taken.get(holder.bundle).add(name);
          return { path: `${holder.bundle}:${name}`, namespace: 'held' };
        }
        const standIn = later.get(name);
        if (standIn && standIn.bundle !== self) return { path: standIn.bundle, namespace: 'later' };
        return undefined;
      });
      builder.onLoad({ filter: /.*/, namespace: 'held' }, (args) => {
        const [bundle, name] = args.path.split(/:(.*)/);
        return { contents: `module.exports = require(${key(`./${bundle}.js`)}).modules[${key(name)}];`, loader: 'js' };
      });
      builder.onLoad({ filter: /.*/, namespace: 'later' }, (args) => {
        const { names } = [...later.values()].find(({ bundle }) => bundle === args.path);
        const file = key(`./${args.path}.js`);
        const forwards = names.map(
          (name) => `export function ${name}(...args) {\n  return require(${file}).${name}(...args);\n}`,
        );
        return { contents: forwards.join('\n'), loader: 'js' };
      });
    },
  };
}

const options = (bundle, contents, plugins = []) => ({
  stdin: {
    contents,
    resolveDir: root,
    sourcefile: `${bundle}-entries.${bundle === 'baton-tools' ? 'cjs' : 'mjs'}`,
    loader: 'js',
  },
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
// What the app's bundle holds, and each later-loaded bundle without it; then the tools' bundle
// without what those hold; then the later-loaded bundles and the app's again, with the table of
// what the others took from them.
const later = await laterExports();
const BUILT = ['baton', ...Object.keys(LATER), 'baton-tools'];
const taken = new Map(BUILT.map((bundle) => [bundle, new Set()]));
const holdings = (result) => new Set(Object.keys(result.metafile.inputs).filter((name) => existsSync(join(root, name))));
const firstPass = (bundle, from, modules = []) =>
  build({
    ...options(bundle, entries(bundle, modules), [linker({ self: bundle, from, later, taken })]),
    write: false,
    metafile: true,
  });
// Each later file takes only from baton.js, so a module two of them need and baton.js does not
// would be in both, with two identities: baton.js holds such a module too, in its table.
const shared = new Set();
let app;
let laterHeld;
for (;;) {
  for (const names of taken.values()) names.clear();
  app = { bundle: 'baton', held: holdings(await firstPass('baton', [], [...shared].sort())) };
  laterHeld = [];
  for (const bundle of Object.keys(LATER)) laterHeld.push({ bundle, held: holdings(await firstPass(bundle, [app])) });
  const both = laterHeld.flatMap((a, i) => laterHeld.slice(i + 1).flatMap((b) => [...a.held].filter((name) => b.held.has(name))));
  if (both.length === 0) break;
  for (const name of both) shared.add(name);
}
for (const name of shared) taken.get('baton').add(name);
const finalPasses = [
  { bundle: 'baton-tools', from: [app, ...laterHeld] },
  ...laterHeld.map(({ bundle }) => ({ bundle, from: [app] })),
  { bundle: 'baton', from: [] },
];
const held = { baton: app.held, ...Object.fromEntries(laterHeld.map(({ bundle, held }) => [bundle, held])) };
for (const { bundle, from } of finalPasses) {
  const table = bundle === 'baton-tools' ? [] : [...taken.get(bundle)].sort();
  const plugins = [linker({ self: bundle, from, later, taken })];
  const result = await build({ ...options(bundle, entries(bundle, table), plugins), metafile: true });
  if (bundle === 'baton-tools') held[bundle] = holdings(result);
}
// Every file a bundle compiled in.
const written = Object.values(held)
  .flatMap((names) => [...names])
  .map((name) => readFileSync(join(root, name), 'utf8'))
  .join('\n');

const escapeRegExp = (text) => text.replace(/[$^\\.*+?()[\]{}|]/g, '\\$&');

/**
 * Each class under the name it was written with. esbuild writes a module's class as
 * `var Name = class _Name {` when its body names it, and `.name` (what an error names itself by)
 * and a stack trace's frames then read `_Name`; the inner name is given back, as no source uses
 * it. A clash between two modules would rename a class `Name2`: that the build refuses.
 */
function namesAsWritten(bundle, code) {
  let named = code;
  for (const [, name] of code.matchAll(/\b([A-Za-z_$][\w$]*) ?= ?class _\1\b/g)) {
    const inner = escapeRegExp(`_${name}`);
    if (new RegExp(`(?<![\\w$])${inner}(?![\\w$])`).test(written)) {
      throw new Error(`${bundle}.js: cannot name class ${name} as written, since a source uses _${name}`);
    }
    named = named.replace(new RegExp(`(?<![\\w$])${inner}(?![\\w$])`, 'g'), name);
  }
  // A class src/ does not declare whose name is one it declares and digits (`Sha256` as `Sha2562`).
  const renamedFrom = (name) =>
    classNames.has(name)
      ? undefined
      : [...name.matchAll(/\d/g)].map((m) => name.slice(0, m.index)).find((base) => classNames.has(base));
  const renamed = [...named.matchAll(/\bclass ([A-Za-z_$][\w$]*\d)\b|\b([A-Za-z_$][\w$]*\d) ?= ?class\b/g)]
    .map((m) => renamedFrom(m[1] ?? m[2]))
    .filter((name) => name !== undefined);
  if (renamed.length > 0) {
    throw new Error(`${bundle}.js renames class ${renamed.join(', ')} (a clash between modules): rename one of them in src/`);
  }
  return named;
}

// ASCII only: one character past it anywhere (esbuild escapes strings, but keeps some comments as
// written) makes Node decode the whole file as UTF-16 on every start, ~1 ms. In a comment, the
// escape reads the same.
for (const bundle of BUILT) {
  const bundled = join(out, `${bundle}.js`);
  const code = namesAsWritten(bundle, readFileSync(bundled, 'utf8'));
  writeFileSync(
    bundled,
    code.replace(/[^\0-\x7f]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`),
  );
  for (const [entry, { file, shebang }] of Object.entries(BUNDLES[bundle] ?? {})) {
    const body = `'use strict';\n${file(`require('./${bundle}.js')[${key(entry)}]`)}\n`;
    writeFileSync(join(out, `${entry}.js`), shebang ? `#!/usr/bin/env node\n${body}` : body, { mode: shebang ? 0o755 : 0o644 });
  }
}
