import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ensureBicep } from './bicep.mjs';

const run = promisify(execFile);

/** One compiler or linter finding, from the SARIF the CLI writes (stderr for a build, stdout for a lint). */
export interface BicepDiagnostic {
  rule: string;
  /** The file's path (the CLI gives a file: URI). */
  file: string;
  line: number;
  message: string;
}

export interface BicepResult {
  /** The ARM JSON of a build; empty for a lint, or when the build failed. */
  stdout: string;
  diagnostics: BicepDiagnostic[];
  exitCode: number;
}

interface Sarif {
  runs: {
    results?: {
      ruleId: string;
      message: { text: string };
      locations?: { physicalLocation: { artifactLocation: { uri: string }; region?: { startLine?: number } } }[];
    }[];
  }[];
}

/**
 * `bicep build` of one file to ARM JSON. Every diagnostic counts: a warning from the compiler (an
 * unknown property, an API version it has no types for) is a deploy that fails or does something
 * else than the file says, so callers treat any diagnostic as a failure.
 */
export function bicepBuild(file: string, options: { signal?: AbortSignal } = {}): Promise<BicepResult> {
  return runBicep(['build', file, '--stdout'], undefined, options.signal, 'stderr');
}

/**
 * `bicep build` of every .bicep file under `dir` in one run of the compiler: each file's ARM JSON,
 * by path from `dir` with forward slashes (`main.bicep`, `modules/storage.bicep`). A module's own
 * build carries the same templateHash as its template nested in main.bicep's, which names the
 * modules there.
 */
export async function bicepBuildAll(
  dir: string,
  options: { signal?: AbortSignal } = {},
): Promise<{ templates: Record<string, string>; diagnostics: BicepDiagnostic[]; exitCode: number }> {
  const out = mkdtempSync(join(tmpdir(), 'bicep-build-'));
  try {
    const { diagnostics, exitCode } = await runBicep(
      ['build', '--pattern', '**/*.bicep', '--outdir', out],
      dir,
      options.signal,
      'stderr',
    );
    const templates: Record<string, string> = {};
    for (const entry of readdirSync(out, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.json')) continue;
      const path = join(entry.parentPath, entry.name);
      templates[
        relative(out, path)
          .split(sep)
          .join('/')
          .replace(/\.json$/, '.bicep')
      ] = readFileSync(path, 'utf8');
    }
    return { templates, diagnostics, exitCode };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/**
 * `bicep lint` of every .bicep file under `dir`, each on its own: linting main.bicep alone does
 * not report every finding in the modules it deploys.
 */
export function bicepLint(dir: string, options: { signal?: AbortSignal } = {}): Promise<BicepResult> {
  return runBicep(['lint', '--pattern', '**/*.bicep'], dir, options.signal, 'stdout');
}

async function runBicep(
  command: string[],
  cwd: string | undefined,
  signal: AbortSignal | undefined,
  sarifOn: 'stdout' | 'stderr',
): Promise<BicepResult> {
  const args = [...command, '--diagnostics-format', 'sarif'];
  let stdout = '';
  let stderr = '';
  let exitCode = 0;
  try {
    ({ stdout, stderr } = await run(ensureBicep(), args, { cwd, maxBuffer: 64 * 1024 * 1024, signal }));
  } catch (error) {
    const failed = error as { code?: unknown; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw error;
    exitCode = failed.code;
    stdout = failed.stdout ?? '';
    stderr = failed.stderr ?? '';
  }
  if (sarifOn === 'stdout') {
    if (stderr.trim()) throw new Error(`bicep ${command[0]} failed: ${stderr.trim()}`);
    return { stdout: '', diagnostics: parseSarif(stdout), exitCode };
  }
  return { stdout: exitCode === 0 ? stdout : '', diagnostics: parseSarif(stderr), exitCode };
}

/** The findings of every SARIF document in the output, each once. */
function parseSarif(output: string): BicepDiagnostic[] {
  // A lint of several files writes one document per file, each straight after the last ("}{").
  const documents = output
    .replace(/^\}\{$/gm, '}\n{')
    .split(/^(?=\{)/m)
    .filter((part) => part.trim());
  const found = documents.flatMap((text) => {
    if (!text.trimStart().startsWith('{')) throw new Error(`bicep wrote something other than SARIF: ${text.trim()}`);
    return findings(JSON.parse(text) as Sarif);
  });
  const seen = new Set<string>();
  return found.filter((d) => {
    const key = `${d.file}:${d.line}:${d.rule}:${d.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function findings(sarif: Sarif): BicepDiagnostic[] {
  return sarif.runs.flatMap((run) =>
    (run.results ?? []).map((result) => {
      const location = result.locations?.[0]?.physicalLocation;
      const uri = location?.artifactLocation.uri ?? '';
      return {
        rule: result.ruleId,
        file: uri.startsWith('file:') ? fileURLToPath(uri) : uri,
        line: location?.region?.startLine ?? 0,
        message: result.message.text,
      };
    }),
  );
}

/** Diagnostics one per line, with paths relative to `root`, for an assertion message. */
export function describeDiagnostics(diagnostics: readonly BicepDiagnostic[], root: string): string {
  return diagnostics
    .map((d) => `${d.file.startsWith(root) ? d.file.slice(root.length + 1) : d.file}:${d.line} ${d.rule}: ${d.message}`)
    .join('\n');
}
