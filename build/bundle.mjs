// The published package's code: the four public entries, the CLI and the local host's instance
// process, compiled from src/ into one CommonJS file, dist/bundle/baton.js, beside a small file
// per entry that takes its part. The type declarations stay in dist/src.
//
// Why one file: on Flex Consumption every cold start loads the package anew, and loading ~120
// compiled modules and zod's ~300 files one by one cost a Functions app ~120 ms before its
// registrations were done (bench/benchmarks/footprint.ts). One file is read and compiled once,
// and zod is cut to what Baton calls.
//
// Why one file for all of them: a class must have one identity whichever entry it came through,
// or `instanceof InvalidConfigError` fails on an error that `runJobOnce` threw, and the local
// host and the app it runs share one copy. Each entry's part is a getter, so a process evaluates
// only the modules of the entries it loads: an app never runs the CLI or the embedded Azurite.
//
// What stays outside: every package with process-wide state or the app's own copy (the Azure
// SDKs, OpenTelemetry, durable-functions, azurite, commander) is required as it is installed.
// Inlined are only pure libraries: zod, croner and semver.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'bundle');

/** A package entry's file hands on its part as it is. */
const library = (source) => ({ source, file: (part) => `module.exports = ${part};` });

/** Each file in dist/bundle: the module it takes from src/, and what the file does with it. */
const ENTRIES = {
  index: library('src/index'),
  functions: library('src/functions'),
  election: library('src/election'),
  testing: library('src/testing'),
  // The `bin`.
  cli: { source: 'src/cli/main', file: (part) => `${part}.runCli();`, shebang: true },
  // What the local host spawns per instance (`src/local/cluster.ts` looks for it beside itself);
  // the module runs the instance as it is loaded.
  'instance-main': { source: 'src/local/instance-main', file: (part) => `${part};` },
};
const INLINED = ['zod', 'croner', 'semver'];

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const installed = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})];
const external = installed.filter((name) => !INLINED.includes(name)).flatMap((name) => [name, `${name}/*`]);

const key = (entry) => JSON.stringify(entry);
// A getter per entry: esbuild turns each `require` of an ES module into a lazy initializer.
const contents = `module.exports = {\n${Object.entries(ENTRIES)
  .map(([entry, { source }]) => `  get ${key(entry)}() { return require(${key(`./${source}`)}); },`)
  .join('\n')}\n};\n`;

mkdirSync(out, { recursive: true });
await build({
  stdin: { contents, resolveDir: root, sourcefile: 'baton-entries.cjs', loader: 'js' },
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node22',
  // ES module builds, so zod is tree-shaken to what Baton calls.
  mainFields: ['module', 'main'],
  external,
  // Errors name themselves by `new.target.name`: a class renamed to avoid a clash would lie.
  keepNames: true,
  tsconfig: join(root, 'tsconfig.build.json'),
  outfile: join(out, 'baton.js'),
  logLevel: 'warning',
  legalComments: 'eof',
});
// ASCII only: one character past it anywhere (esbuild escapes strings, but keeps some comments as
// written) makes Node decode the whole file as UTF-16 on every start, ~1 ms. In a comment, the
// escape reads the same.
const bundled = join(out, 'baton.js');
const code = readFileSync(bundled, 'utf8');
writeFileSync(
  bundled,
  code.replace(/[^\0-\x7f]/gu, (c) => `\\u{${c.codePointAt(0).toString(16)}}`),
);

for (const [entry, { file, shebang }] of Object.entries(ENTRIES)) {
  const body = `'use strict';\n${file(`require('./baton.js')[${key(entry)}]`)}\n`;
  writeFileSync(join(out, `${entry}.js`), shebang ? `#!/usr/bin/env node\n${body}` : body, { mode: shebang ? 0o755 : 0o644 });
}
