// azd's postprovision hook (azure.yaml): sets the function app's site update strategy, which
// decides how a deploy replaces the running instances (docs/deploy.md, "Deploys and the leader").
//
// Why a hook and not the template: no Microsoft.Web/sites API version the pinned Bicep knows has
// functionAppConfig.siteUpdateStrategy, so the Azure CLI sets it. Why after provision: the app
// exists then, and azd deploys only afterwards, so the deploy already rolls under the strategy
// chosen. It runs on every provision and sets the value each time, so running it again is harmless.
//
// It fails with one line, and a non-zero exit stops `azd up` before the deploy.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { extname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The azd environment value that chooses the strategy. */
export const SETTING = 'BATON_SITE_UPDATE_STRATEGY';

/** The strategies Flex Consumption has, spelled as `az ... --type` takes them. */
export const STRATEGIES = ['Recreate', 'RollingUpdate'];

/**
 * Recreate: the platform's own default and generally available. Rolling update is in preview,
 * which Microsoft does not recommend for production apps (docs/deploy.md links the page).
 */
export const DEFAULT_STRATEGY = 'Recreate';

/** Long enough for a slow management call; without a bound, a stuck az would hold `azd up` forever. */
const AZ_TIMEOUT_MS = 300_000;

const PREFIX = 'site-update-strategy:';

/** The strategy the environment asks for; throws when it is not one of STRATEGIES. */
export function chooseStrategy(env) {
  const value = (env[SETTING] ?? '').trim();
  if (value === '') return DEFAULT_STRATEGY;
  // Exact spelling only: the value is documented as written, and a near miss is more likely a typo.
  if (!STRATEGIES.includes(value))
    throw new Error(`${SETTING} is "${value}"; allowed: ${STRATEGIES.join(', ')} (unset: ${DEFAULT_STRATEGY})`);
  return value;
}

/** The app, from the template's outputs, and the subscription azd deployed it to. */
export function targetOf(env) {
  const missing = ['AZURE_FUNCTION_NAME', 'AZURE_RESOURCE_GROUP'].filter((name) => !env[name]?.trim());
  if (missing.length > 0)
    throw new Error(
      `${missing.join(' and ')} not set: run this through azd (azd provision), which passes the template's outputs`,
    );
  const args = ['--name', env.AZURE_FUNCTION_NAME.trim(), '--resource-group', env.AZURE_RESOURCE_GROUP.trim()];
  // az has its own default subscription, which need not be the one azd deployed to.
  const subscription = env.AZURE_SUBSCRIPTION_ID?.trim();
  if (subscription) args.push('--subscription', subscription);
  return args;
}

/** The arguments of `az functionapp update-strategy config set` and `show`. */
export function azArgs(target, strategy) {
  const command = ['functionapp', 'update-strategy', 'config'];
  // --only-show-errors: az's warnings on stderr would otherwise bury the line that says what failed.
  return {
    set: [...command, 'set', ...target, '--type', strategy, '--only-show-errors', '--output', 'none'],
    show: [...command, 'show', ...target, '--only-show-errors', '--output', 'json'],
  };
}

/**
 * The strategy type in what `config show` printed. Where it sits is not pinned down, so this
 * takes the `type` of a `siteUpdateStrategy` object anywhere in the result, and otherwise a
 * top-level `type` (the strategy object itself). Undefined when there is neither.
 */
export function strategyIn(json) {
  const nested = findKey(json, 'siteupdatestrategy', 0);
  if (nested !== undefined) {
    if (typeof nested === 'string') return nested;
    if (typeof nested?.type === 'string') return nested.type;
    return undefined;
  }
  return typeof json?.type === 'string' ? json.type : undefined;
}

function findKey(value, lowerKey, depth) {
  if (value === null || typeof value !== 'object' || depth > 8) return undefined;
  for (const [key, child] of Object.entries(value)) if (key.toLowerCase() === lowerKey) return child;
  for (const child of Object.values(value)) {
    const found = findKey(child, lowerKey, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Where `name` is on the PATH in `env`, or undefined; on Windows, with PATHEXT's extensions. */
export function findOnPath(name, env, platform = process.platform) {
  const pathValue = env.PATH ?? env.Path ?? '';
  const extensions = platform === 'win32' ? (env.PATHEXT ?? '.COM;.EXE;.BAT;.CMD').split(';').filter(Boolean) : [''];
  for (const dir of pathValue.split(platform === 'win32' ? ';' : ':')) {
    if (!dir) continue;
    for (const ext of extensions) {
      const candidate = join(dir, name + ext);
      if (existsSync(candidate)) return candidate;
    }
  }
  return undefined;
}

/** What az said last: its last ERROR line if it printed one, else its last line; tokens cut out. */
export function lastErrorLine(stderr) {
  const lines = String(stderr ?? '')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(Boolean);
  const line = lines.findLast((l) => l.startsWith('ERROR')) ?? lines.at(-1) ?? '';
  // A JWT (access tokens are) or a bearer credential must not reach azd's log.
  return line.replace(/eyJ[\w-]+\.[\w-]+\.[\w-]*/g, '<redacted>').replace(/(Bearer\s+)\S+/gi, '$1<redacted>');
}

/**
 * Runs az with an argument array and captures what it prints. Throws when az is not on PATH.
 * On Windows az is a .cmd file, which Node starts only through cmd.exe; the arguments are then
 * quoted, and refused if they hold a character cmd.exe would still act on inside quotes.
 */
export function runAz(args, env = process.env) {
  const az = findOnPath('az', env);
  if (!az) throw new Error('az (the Azure CLI) is not on PATH: install it and sign in with az login');
  const options = { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: AZ_TIMEOUT_MS, windowsHide: true };
  const viaCmd = process.platform === 'win32' && /\.(cmd|bat)$/i.test(extname(az));
  let result;
  if (viaCmd) {
    const unsafe = [az, ...args].find((arg) => /["%!^\r\n]/.test(arg));
    if (unsafe !== undefined) throw new Error(`refusing to pass ${JSON.stringify(unsafe)} to az through cmd.exe`);
    result = spawnSync([az, ...args].map((arg) => `"${arg}"`).join(' '), { ...options, shell: true });
  } else {
    result = spawnSync(az, args, options);
  }
  if (result.error) {
    if (result.error.code === 'ETIMEDOUT')
      throw new Error(`az ${args.slice(0, 4).join(' ')} did not finish in ${AZ_TIMEOUT_MS / 1000} s`);
    throw new Error(`az could not be started: ${result.error.message}`);
  }
  return { status: result.status, signal: result.signal, stdout: result.stdout ?? '', stderr: result.stderr ?? '' };
}

/**
 * Sets the strategy the environment asks for on the app azd provisioned and checks that Azure
 * reports it. Returns the line to print; throws an Error whose message is one line.
 */
export function applySiteUpdateStrategy(env, az = runAz) {
  const strategy = chooseStrategy(env);
  const target = targetOf(env);
  const app = `${env.AZURE_FUNCTION_NAME.trim()} (resource group ${env.AZURE_RESOURCE_GROUP.trim()})`;
  const commands = azArgs(target, strategy);
  const call = (args) => {
    const result = az(args, env);
    if (result.status !== 0) {
      const said = lastErrorLine(result.stderr);
      const how = result.status === null ? `was stopped by ${result.signal}` : `exited with ${result.status}`;
      throw new Error(`az ${args.slice(0, 4).join(' ')} ${how} for ${app}${said ? `: ${said}` : ''}`);
    }
    return result.stdout;
  };
  call(commands.set);
  const shown = call(commands.show);
  let json;
  try {
    json = JSON.parse(shown);
  } catch {
    throw new Error(`az functionapp update-strategy config show printed no JSON for ${app}`);
  }
  const reported = strategyIn(json);
  if (reported === undefined)
    throw new Error(`az functionapp update-strategy config show reports no strategy for ${app} after setting ${strategy}`);
  // The service may spell it in another case; the strategy is the same.
  if (reported.toLowerCase() !== strategy.toLowerCase())
    throw new Error(`set ${strategy} on ${app}, but az functionapp update-strategy config show reports ${reported}`);
  const why = (env[SETTING] ?? '').trim() === '' ? `${SETTING} unset: the default` : SETTING;
  return `${PREFIX} ${app} now deploys with ${strategy}, checked (${why})`;
}

/** One line, whatever the message held. */
const oneLine = (text) => text.replace(/\s*\r?\n\s*/g, ' ').trim();

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (invokedDirectly) {
  try {
    console.log(oneLine(applySiteUpdateStrategy(process.env)));
  } catch (err) {
    console.error(oneLine(`${PREFIX} ${err instanceof Error ? err.message : String(err)}`));
    process.exitCode = 1;
  }
}
