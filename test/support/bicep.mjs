// The Bicep compiler for the infra tests. Microsoft ships its command line for Linux as a NuGet
// package, so it is restored the way any NuGet package is (a PackageDownload of one pinned
// version into the machine's global packages folder) and reused after: a machine that has it
// needs no network. `.ci/run` starts this beside `npm ci`; it touches nothing in the repository.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BICEP_PACKAGE = 'Azure.Bicep.CommandLine.linux-x64';
export const BICEP_VERSION = '0.49.2';

const packages = process.env.NUGET_PACKAGES || join(homedir(), '.nuget', 'packages');
const binary = join(packages, BICEP_PACKAGE.toLowerCase(), BICEP_VERSION, 'tools', 'bicep');

/** The path of the pinned Bicep CLI, restored from NuGet the first time. */
export function ensureBicep() {
  if (!existsSync(binary)) restore();
  // NuGet keeps the file's mode from the package, which is not always executable.
  if ((statSync(binary).mode & 0o100) === 0) chmodSync(binary, 0o755);
  return binary;
}

function restore() {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`the infra tests compile with ${BICEP_PACKAGE} ${BICEP_VERSION}: Linux x64 only`);
  }
  const project = mkdtempSync(join(tmpdir(), 'bicep-restore-'));
  try {
    // A project with nothing to build: PackageDownload fetches a package without adding it to one.
    writeFileSync(
      join(project, 'restore.csproj'),
      [
        '<Project Sdk="Microsoft.NET.Sdk">',
        '  <PropertyGroup><TargetFramework>netstandard2.0</TargetFramework><DisableImplicitFrameworkReferences>true</DisableImplicitFrameworkReferences></PropertyGroup>',
        `  <ItemGroup><PackageDownload Include="${BICEP_PACKAGE}" Version="[${BICEP_VERSION}]" /></ItemGroup>`,
        '</Project>',
        '',
      ].join('\n'),
    );
    try {
      execFileSync('dotnet', ['restore', join(project, 'restore.csproj'), '--nologo', '--verbosity', 'quiet'], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1', DOTNET_SKIP_FIRST_TIME_EXPERIENCE: '1' },
      });
    } catch (error) {
      const why = error && error.code === 'ENOENT' ? 'the .NET SDK (dotnet) is not on PATH' : String(error.message ?? error);
      throw new Error(`cannot restore ${BICEP_PACKAGE} ${BICEP_VERSION} from NuGet for the infra tests: ${why}`);
    }
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
  if (!existsSync(binary)) throw new Error(`dotnet restored ${BICEP_PACKAGE} ${BICEP_VERSION}, but ${binary} is not there`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(ensureBicep());
