import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { writeBenchmarksMarkdown } from './lib/benchmarks-md';

/**
 * Runs every benchmark in bench/benchmarks/*.ts in order, or only those named:
 *   node --import tsx bench/run.ts [name ...]
 */
interface Benchmark {
  name: string;
  run(options?: { smoke?: boolean }): Promise<unknown>;
}

const DIR = join(__dirname, 'benchmarks');

async function main(): Promise<number> {
  const files = readdirSync(DIR)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .sort();
  const available = new Map(files.map((f) => [basename(f, '.ts'), join(DIR, f)]));
  const wanted = process.argv.slice(2).filter((a) => a !== '--');
  const unknown = wanted.filter((n) => !available.has(n));
  if (unknown.length > 0) {
    console.error(`unknown benchmark ${unknown.join(', ')}; known: ${[...available.keys()].join(', ')}`);
    return 2;
  }
  const names = wanted.length > 0 ? wanted : [...available.keys()];
  let failed = 0;
  for (const name of names) {
    const mod = (await import(pathToFileURL(available.get(name) as string).href)) as Partial<Benchmark> & {
      default?: Partial<Benchmark>;
    };
    const bench = typeof mod.run === 'function' ? mod : mod.default;
    if (!bench || typeof bench.run !== 'function') {
      console.error(`${name}: bench/benchmarks/${name}.ts does not export run()`);
      failed++;
      continue;
    }
    try {
      await bench.run();
    } catch (err) {
      console.error(`${bench.name ?? name}: failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      failed++;
    }
  }
  // BENCHMARKS.md and the throughput chart, from every result present (not only those just run).
  try {
    writeBenchmarksMarkdown();
  } catch (err) {
    console.error(`BENCHMARKS.md: not regenerated: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    failed++;
  }
  return failed > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
