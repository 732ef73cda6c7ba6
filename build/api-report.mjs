// The public API, pinned as the Azure SDK pins its own: API Extractor reads each entry's type
// declarations (dist/src, which `npm run build` writes) and compares what the entry exports with
// the report committed in api/<entry>.api.md. A difference is a change to the API: review it,
// then write the reports anew with `npm run api`. `test/unit/api-report.test.ts` fails until the
// committed reports match.
//
// A report also names each internal type that a public one reaches (`ae-forgotten-export`): a
// user can see it but not import it.
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const ENTRIES = ['index', 'functions', 'election', 'testing'];
const EXPORTED = /^export (?:declare )?(?:abstract )?(?:class|interface|type|function|const|let|enum|namespace) (\w+)/gm;

/**
 * Checks (or, with `update`, writes) the report of each entry. `typesDir` holds the entries'
 * declarations (default dist/src); `reportDir` the reports (default api/). Returns one result per
 * entry: whether its API differs from the report, the names its public types reach that it does
 * not export (`forgotten`), those of them no entry exports (`internal`), and anything API
 * Extractor warned of.
 */
export function apiReports({
  update = false,
  typesDir = join(ROOT, 'dist', 'src'),
  reportDir = join(ROOT, 'api'),
  entries = ENTRIES,
} = {}) {
  const scratch = mkdtempSync(join(tmpdir(), 'baton-api-'));
  mkdirSync(reportDir, { recursive: true });
  try {
    const results = entries.map((entry) => {
      const config = ExtractorConfig.prepare({
        configObject: {
          projectFolder: ROOT,
          mainEntryPointFilePath: join(typesDir, `${entry}.d.ts`),
          compiler: {
            overrideTsconfig: {
              compilerOptions: {
                target: 'ES2022',
                module: 'Node20',
                moduleResolution: 'Node16',
                strict: true,
                skipLibCheck: true,
                types: ['node'],
                // API Extractor cannot follow a global that @types/node declares inside a module
                // (AbortSignal): with the DOM library's declaration first, it sees a global.
                lib: ['ES2022', 'DOM'],
              },
              files: [join(typesDir, `${entry}.d.ts`)],
            },
          },
          apiReport: { enabled: true, reportFolder: reportDir, reportTempFolder: scratch, reportFileName: `${entry}.api.md` },
          docModel: { enabled: false },
          dtsRollup: { enabled: false },
          tsdocMetadata: { enabled: false },
          messages: {
            compilerMessageReporting: { default: { logLevel: 'warning' } },
            extractorMessageReporting: {
              default: { logLevel: 'warning' },
              'ae-forgotten-export': { logLevel: 'warning', addToApiReportFile: true },
              // Baton marks no release stages: everything an entry exports is public.
              'ae-missing-release-tag': { logLevel: 'none' },
              // The report marks what has no comment; not a reason to fail.
              'ae-undocumented': { logLevel: 'none' },
            },
            // Comments are written for readers, not for TSDoc's grammar.
            tsdocMessageReporting: { default: { logLevel: 'none' } },
          },
        },
        configObjectFullPath: join(ROOT, 'build', 'api-extractor.json'),
        packageJsonFullPath: join(ROOT, 'package.json'),
      });
      const problems = [];
      const result = Extractor.invoke(config, {
        localBuild: update,
        messageCallback: (message) => {
          message.handled = true;
          // The console-* messages say what was written where; this script says it once.
          if (message.messageId.startsWith('console-')) return;
          if (message.logLevel === 'error' || message.logLevel === 'warning')
            problems.push(message.formatMessageWithLocation(ROOT));
        },
      });
      // Written into the report rather than passed to the callback.
      const report = readFileSync(join(scratch, `${entry}.api.md`), 'utf8');
      const forgotten = [...report.matchAll(/\(ae-forgotten-export\) The symbol "([^"]+)"/g)].map((m) => m[1]);
      return { entry, changed: result.apiReportChanged, forgotten: [...new Set(forgotten)].sort(), problems, report };
    });
    // A name another entry exports is one an app can import: only the rest are internal.
    const exported = new Set(results.flatMap(({ report }) => [...report.matchAll(EXPORTED)].map((m) => m[1])));
    return results.map(({ report: _report, ...result }) => ({
      ...result,
      internal: result.forgotten.filter((name) => !exported.has(name)),
    }));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const update = process.argv.includes('--update');
  let failed = false;
  for (const { entry, changed, internal, problems } of apiReports({ update })) {
    for (const problem of problems) console.error(`${entry}: ${problem}`);
    if (internal.length) console.log(`${entry}: reaches ${internal.length} internal names: ${internal.join(', ')}`);
    if (changed && !update) {
      failed = true;
      console.error(`${entry}: its API differs from api/${entry}.api.md; review the change, then run npm run api`);
    } else if (changed) console.log(`${entry}: wrote api/${entry}.api.md`);
  }
  process.exitCode = failed ? 1 : 0;
}
