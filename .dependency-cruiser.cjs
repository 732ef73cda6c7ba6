/**
 * The architecture check (`npm test` runs it through `npm run lint:arch`): the layers of
 * DESIGN.md, lowest first. A module may import its own layer and the layers below it, never one
 * above; the two engines never import each other; nothing in src/ imports the app skin, the
 * benchmarks or the tests; and there are no import cycles.
 */
const LAYERS = [
  { name: 'base', paths: ['src/clock/', 'src/errors\\.ts$', 'src/redact\\.ts$', 'src/visible\\.ts$', 'src/zod\\.ts$'] },
  { name: 'ports', paths: ['src/storage/', 'src/queue/', 'src/schedule/'] },
  { name: 'election, fencing, jobs', paths: ['src/lease/', 'src/fencing/', 'src/jobs/'] },
  { name: 'shared run model', paths: ['src/hub/'] },
  // What the engines report (a narrow port) and its OpenTelemetry API implementation; the SDK and
  // its exporters are composed in src/app/.
  { name: 'telemetry', paths: ['src/telemetry/'] },
  { name: 'engines', paths: ['src/engine/', 'src/durable/'] },
  { name: 'composition root', paths: ['src/app/'] },
  {
    name: 'skins',
    paths: ['src/cli/', 'src/local/', 'src/index\\.ts$', 'src/testing\\.ts$', 'src/functions\\.ts$', 'src/election\\.ts$'],
  },
];

const anyOf = (paths) => `^(${paths.join('|')})`;

const upward = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `no-upward-from-${layer.name.replace(/[^a-z]+/g, '-')}`,
  comment: `${layer.name} may import only its own layer and those below it`,
  severity: 'error',
  from: { path: anyOf(layer.paths) },
  to: { path: anyOf(LAYERS.slice(i + 1).flatMap((l) => l.paths)) },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'an import cycle makes the layers meaningless and the load order fragile',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-app-bench-or-tests-in-src',
      comment: 'the library does not import the reference app, the chaos soak, the benchmarks or the tests',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(functions|chaos|bench|test)/' },
    },
    {
      name: 'app-uses-public-entries',
      comment:
        'functions/ is the reference consumer: it imports what a user of the package can, the ' +
        "entries in package.json's exports (src/index, src/functions, src/election, src/testing).",
      severity: 'error',
      from: { path: '^functions/' },
      to: { path: '^src/', pathNot: '^src/(index|functions|election|testing)\\.ts$' },
    },
    {
      name: 'engines-apart',
      comment: 'the queue engine and the durable engine share src/hub, never each other',
      severity: 'error',
      from: { path: '^src/(engine|durable)/' },
      to: { path: '^src/(engine|durable)/', pathNot: '^src/$1/' },
    },
    {
      name: 'elector-on-top-of-its-room',
      comment:
        'the elector composes the lease room (term, handover, policy, ports); nothing in src/lease/ ' +
        'imports it back, so each part can be read and tested without the loop',
      severity: 'error',
      from: { path: '^src/lease/', pathNot: '^src/lease/leader-elector\\.ts$' },
      to: { path: '^src/lease/leader-elector\\.ts$' },
    },
    {
      name: 'every-module-has-a-layer',
      comment: 'a new folder in src/ must be given its place in LAYERS',
      severity: 'error',
      from: { path: '^src/', pathNot: anyOf(LAYERS.flatMap((l) => l.paths)) },
      to: {},
    },
    ...upward,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
