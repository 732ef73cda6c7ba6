import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';

/**
 * A lint for the deployment files, read as text: the Bicep compiler and Azure are out of reach
 * where the tests run, so these rules are what stands between a change and a key in an app
 * setting or a role at the wrong scope. Every function returns problems, one line each,
 * starting with the rule's id (`rule: file: what`); an empty list means the files pass.
 */

export interface InfraFiles {
  /** Bicep files by path from the repository root, with forward slashes (`infra/main.bicep`). */
  bicep: Record<string, string>;
  parametersJson: string;
  azureYaml: string;
  hostJson: string;
}

/** What the files must agree with: Baton's own defaults and names, and the package layout. */
export interface InfraExpectations {
  hub: string;
  leaseSeconds: number;
  coordinatorSchedule: string;
  leaseContainer: string;
  auditContainer: string;
  /** BATON_MAX_ATTEMPTS's default, which host.json's maxDequeueCount must equal. */
  maxAttempts: number;
  /** What Baton appends to the hub to name its queues and container (`-work`, `-runs`, ...). */
  hubSuffixes: readonly string[];
  maximumInstanceCount: number;
  /** package.json `main`: the staged package must contain it. */
  packageMain: string;
  /** The paths the deploy hook stages, and where (see infra/hooks/stage-package.mjs). */
  stagedPaths: readonly string[];
  stageDir: string;
  /** Whether a file exists, by path from the repository root. */
  exists(path: string): boolean;
  /**
   * Every app setting Baton reads (`BATON_*`), with the default its Bicep parameter must have, as
   * Bicep text (`'baton'`, `15`); `''` for a setting whose default is "unset".
   */
  batonSettings: Readonly<Record<string, string>>;
}

export const MAIN_BICEP = 'infra/main.bicep';
/** Where a rule over all the Bicep files reports. */
const ALL_BICEP = 'infra/**/*.bicep';

/** Role definition ids (built-in roles are the same GUID in every tenant). */
export const ROLE = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe',
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb',
} as const;

/** Roles that reach far beyond data access (or hand out keys): never assigned by these templates. */
export const FORBIDDEN_ROLES: Record<string, string> = {
  '8e3af657-a8ff-443c-a75c-2fe8c4bcb635': 'Owner',
  'b24988ac-6180-42a0-ab88-20f7382dd24c': 'Contributor',
  '18d7d88d-d35e-4fb5-a5c3-7773c20a72d9': 'User Access Administrator',
  '17d1049b-9a84-46fb-8f53-869881c3d3ab': 'Storage Account Contributor',
};

/** Resource types a role assignment may be scoped to: the storage account (or below it) and Application Insights. */
const ROLE_SCOPE_TYPES = ['Microsoft.Storage/storageAccounts', 'Microsoft.Insights/components'];

/** App settings Flex Consumption replaced with functionAppConfig, or that belong to other plans. */
const FLEX_DEPRECATED_SETTINGS = [
  'FUNCTIONS_WORKER_RUNTIME',
  'FUNCTIONS_WORKER_RUNTIME_VERSION',
  'FUNCTIONS_EXTENSION_VERSION',
  'WEBSITE_RUN_FROM_PACKAGE',
  'WEBSITE_CONTENTSHARE',
  'WEBSITE_CONTENTAZUREFILECONNECTIONSTRING',
  'SCM_DO_BUILD_DURING_DEPLOYMENT',
  'ENABLE_ORYX_BUILD',
  'WEBSITE_NODE_DEFAULT_VERSION',
];

/**
 * The host's own storage connection, by account name: the per-service URI form can fail on Flex
 * Consumption (azure-functions-host#11787), and the Durable extension derives its table endpoint
 * from the name too.
 */
const IDENTITY_SETTINGS = [
  'AzureWebJobsStorage__credential',
  'AzureWebJobsStorage__clientId',
  'AzureWebJobsStorage__accountName',
];

/** Storage Table Data Contributor: what the durable engine's task hub needs, and nothing else does. */
const TABLE_DATA_CONTRIBUTOR = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3';

/** The OpenTelemetry instruments Baton exports, each of which the workbook must chart. */
export const BATON_METRICS = [
  'baton.leader.is_leader',
  'baton.leader.transitions',
  'baton.lease.renew.duration',
  'baton.fencing.refusals',
  'baton.items',
  'baton.run.duration',
  'baton.run.open',
  'baton.storage.requests',
] as const;

/** Host.json override of the functions' log level, set only when BATON_LOG_LEVEL is debug. */
const FUNCTION_LOG_LEVEL_OVERRIDE = 'AzureFunctionsJobHost__logging__logLevel__Function';
/** Host.json override of the queue trigger's deliveries, which must follow BATON_MAX_ATTEMPTS. */
const MAX_DEQUEUE_OVERRIDE = 'AzureFunctionsJobHost__extensions__queues__maxDequeueCount';

export const AZURE_YAML_SCHEMA_LINE =
  '# yaml-language-server: $schema=https://raw.githubusercontent.com/Azure/azure-dev/main/schemas/v1.0/azure.yaml.json';

/** The rule id a problem line starts with. */
export function ruleOf(problem: string): string {
  return problem.slice(0, problem.indexOf(':'));
}

// --- reading --------------------------------------------------------------------------------

export function readInfraFiles(root: string): InfraFiles {
  const bicep: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.bicep')) bicep[relative(root, path).split(sep).join('/')] = readFileSync(path, 'utf8');
    }
  };
  walk(join(root, 'infra'));
  return {
    bicep,
    parametersJson: readFileSync(join(root, 'infra', 'main.parameters.json'), 'utf8'),
    azureYaml: readFileSync(join(root, 'azure.yaml'), 'utf8'),
    hostJson: readFileSync(join(root, 'functions', 'host.json'), 'utf8'),
  };
}

// --- Bicep as text --------------------------------------------------------------------------

/**
 * `code` is the text with comments blanked; `masked` also blanks what is inside string literals
 * (interpolations included), so braces can be matched. Both keep every offset and newline.
 */
export interface ScannedBicep {
  raw: string;
  code: string;
  masked: string;
}

export function scanBicep(raw: string): ScannedBicep {
  const n = raw.length;
  const code = raw.split('');
  const masked = raw.split('');
  const blank = (chars: string[], from: number, to: number) => {
    for (let k = from; k < to; k++) if (raw[k] !== '\n') chars[k] = ' ';
  };
  // Index just past the string literal that opens at `start`.
  const stringEnd = (start: number): number => {
    if (raw.startsWith("'''", start)) {
      const close = raw.indexOf("'''", start + 3);
      return close < 0 ? n : close + 3;
    }
    let k = start + 1;
    while (k < n) {
      const ch = raw[k];
      if (ch === '\\') {
        k += 2;
      } else if (ch === "'") {
        return k + 1;
      } else if (ch === '$' && raw[k + 1] === '{') {
        k += 2;
        for (let depth = 1; k < n && depth > 0;) {
          const c = raw[k];
          if (c === "'") {
            k = stringEnd(k);
            continue;
          }
          if (c === '{') depth++;
          else if (c === '}') depth--;
          k++;
        }
      } else {
        k++;
      }
    }
    return n;
  };
  let i = 0;
  while (i < n) {
    if (raw.startsWith('//', i)) {
      const eol = raw.indexOf('\n', i);
      const stop = eol < 0 ? n : eol;
      blank(code, i, stop);
      blank(masked, i, stop);
      i = stop;
    } else if (raw.startsWith('/*', i)) {
      const close = raw.indexOf('*/', i + 2);
      const stop = close < 0 ? n : close + 2;
      blank(code, i, stop);
      blank(masked, i, stop);
      i = stop;
    } else if (raw[i] === "'") {
      const stop = stringEnd(i);
      const quote = raw.startsWith("'''", i) ? 3 : 1;
      blank(masked, i + quote, Math.max(i + quote, stop - quote));
      i = stop;
    } else {
      i++;
    }
  }
  return { raw, code: code.join(''), masked: masked.join('') };
}

/** Index of the bracket that closes the one at `open` (`{` or `[`), or the end of the text. */
function closing(masked: string, open: number): number {
  let depth = 0;
  for (let k = open; k < masked.length; k++) {
    const ch = masked[k];
    if (ch === '{' || ch === '[') depth++;
    else if (ch === '}' || ch === ']') {
      depth--;
      if (depth === 0) return k;
    }
  }
  return masked.length - 1;
}

interface Span {
  start: number;
  end: number;
}

interface BicepResource extends Span {
  symbol: string;
  type: string;
  existing: boolean;
  /** What `= if (...)` deploys the resource on, or undefined when it always is. */
  condition: string | undefined;
  /** The body `{ ... }`, comments blanked. */
  body: string;
}

interface BicepDeclaration {
  name: string;
  /** Everything after `=` up to the end of the line (or of the object or array it opens). */
  value: string;
  /** Decorator lines right above the declaration. */
  decorators: string;
}

interface BicepModule {
  symbol: string;
  path: string;
  body: string;
}

export interface ParsedBicep extends ScannedBicep {
  path: string;
  targetScope: string;
  resources: BicepResource[];
  modules: BicepModule[];
  params: BicepDeclaration[];
  outputs: BicepDeclaration[];
  /** `var` declarations by name: their value, whole when it spans lines. */
  vars: Map<string, string>;
}

function bodyAfter(scanned: ScannedBicep, from: number): Span & { body: string } {
  const open = scanned.masked.indexOf('{', from);
  if (open < 0) return { start: from, end: from, body: '' };
  const end = closing(scanned.masked, open);
  return { start: open, end, body: scanned.code.slice(open, end + 1) };
}

function decoratorsAbove(scanned: ScannedBicep, at: number): string {
  const rawLines = scanned.raw.slice(0, at).split('\n');
  const codeLines = scanned.code.slice(0, at).split('\n');
  rawLines.pop();
  codeLines.pop();
  const taken: string[] = [];
  while (rawLines.length > 0) {
    const rawLine = rawLines.pop() as string;
    const codeLine = (codeLines.pop() as string).trim();
    if (rawLine.trim() === '') break;
    if (/^((param|var|resource|output|module|import|type|func)\s+[A-Za-z_]|targetScope\s*=)/.test(codeLine)) break;
    taken.unshift(codeLine);
  }
  return taken.join('\n');
}

function valueFrom(scanned: ScannedBicep, from: number): string {
  const eol = scanned.code.indexOf('\n', from);
  const lineEnd = eol < 0 ? scanned.code.length : eol;
  const line = scanned.masked.slice(from, lineEnd).trimEnd();
  const last = line[line.length - 1];
  if (last === '{' || last === '[') {
    const open = from + line.length - 1;
    return scanned.code.slice(from, closing(scanned.masked, open) + 1);
  }
  return scanned.code.slice(from, lineEnd).trim();
}

export function parseBicep(path: string, raw: string): ParsedBicep {
  const scanned = scanBicep(raw);
  const { code } = scanned;
  const resources: BicepResource[] = [];
  for (const m of code.matchAll(/^[ \t]*resource\s+([A-Za-z_]\w*)\s+'([^'@]+)@[^']*'\s*(existing)?\s*=/gm)) {
    const after = (m.index ?? 0) + m[0].length;
    const span = bodyAfter(scanned, after);
    const condition = /^\s*if\s*\(([\s\S]*)\)\s*$/.exec(code.slice(after, span.start))?.[1]?.trim();
    resources.push({ symbol: m[1] as string, type: m[2] as string, existing: m[3] !== undefined, condition, ...span });
  }
  const modules: BicepModule[] = [];
  for (const m of code.matchAll(/^[ \t]*module\s+([A-Za-z_]\w*)\s+'([^']+)'\s*=/gm)) {
    modules.push({ symbol: m[1] as string, path: m[2] as string, body: bodyAfter(scanned, (m.index ?? 0) + m[0].length).body });
  }
  const declarations = (keyword: 'param' | 'output') => {
    const found: BicepDeclaration[] = [];
    const pattern = new RegExp(`^[ \\t]*${keyword}\\s+([A-Za-z_]\\w*)\\s+[A-Za-z_][\\w.]*(?:[ \\t]*=[ \\t]*)?`, 'gm');
    for (const m of code.matchAll(pattern)) {
      const at = m.index ?? 0;
      const hasValue = m[0].includes('=');
      found.push({
        name: m[1] as string,
        value: hasValue ? valueFrom(scanned, at + m[0].length) : '',
        decorators: decoratorsAbove(scanned, at),
      });
    }
    return found;
  };
  const vars = new Map<string, string>();
  for (const m of code.matchAll(/^[ \t]*var\s+([A-Za-z_]\w*)\s*=[ \t]*/gm)) {
    vars.set(m[1] as string, valueFrom(scanned, (m.index ?? 0) + m[0].length));
  }
  const targetScope = /^\s*targetScope\s*=\s*'([^']*)'/m.exec(code)?.[1] ?? 'resourceGroup';
  return {
    ...scanned,
    path,
    targetScope,
    resources,
    modules,
    params: declarations('param'),
    outputs: declarations('output'),
    vars,
  };
}

/** The `{ ... }` that follows `key:` inside `text` (a resource body), or '' when there is none. */
function block(text: string, key: string): string {
  const m = new RegExp(`\\b${key}\\s*:\\s*\\{`).exec(text);
  if (!m) return '';
  const open = m.index + m[0].length - 1;
  return text.slice(open, closing(scanBicep(text).masked, open) + 1);
}

/** Whether `code` sets app setting `name` (as an object key or as `name: '<name>'`). */
function setsAppSetting(code: string, name: string): boolean {
  return new RegExp(`(?:^|[\\s{,])'?${name}'?\\s*:|\\bname\\s*:\\s*'${name}'`, 'm').test(code);
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** What the module that deploys `file` passes from main.bicep for `param`, one line, or undefined. */
function passedToModule(main: ParsedBicep, file: ParsedBicep, param: string): string | undefined {
  const module = main.modules.find((m) => posix.normalize(posix.join(posix.dirname(main.path), m.path)) === file.path);
  if (!module) return undefined;
  return new RegExp(`^[ \\t]*${param}\\s*:\\s*(.+?)\\s*$`, 'm').exec(block(module.body, 'params'))?.[1];
}

/**
 * The main.bicep expression behind `expr` in `file`: `expr` itself in main.bicep; in a module,
 * what main.bicep passes for `expr` when `expr` is just one of the module's parameters.
 */
function passedFrom(main: ParsedBicep, file: ParsedBicep, expr: string): string | undefined {
  if (file === main) return expr;
  return file.params.some((p) => p.name === expr) ? passedToModule(main, file, expr) : undefined;
}

/** The value expression of app setting `name` in `code` (one line), or undefined when it is not set. */
function appSettingValue(code: string, name: string): string | undefined {
  return new RegExp(`(?:^|[\\s{,])'?${name}'?\\s*:\\s*([^\\n]+)`, 'm').exec(code)?.[1]?.trim();
}

/** Whether `expr` mentions `name` as a whole identifier. */
const mentions = (expr: string, name: string) => new RegExp(`(?<![\\w.])${escapeRegExp(name)}\\b`).test(expr);

/** An ISO 8601 duration of minutes or hours (`PT5M`, `PT1H`), in minutes; NaN otherwise. */
function minutesOf(duration: string | undefined): number {
  const m = /^PT(?:(\d+)H)?(?:(\d+)M)?$/.exec(duration ?? '');
  if (!m || (m[1] === undefined && m[2] === undefined)) return Number.NaN;
  return Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0);
}

// --- Bicep rules ----------------------------------------------------------------------------

export function lintBicep(files: Record<string, string>, expect: InfraExpectations): string[] {
  const problems: string[] = [];
  const report = (rule: string, file: string, message: string) => problems.push(`${rule}: ${file}: ${message}`);
  const parsed = Object.entries(files).map(([path, raw]) => parseBicep(path, raw));
  const all = parsed.flatMap((file) => file.resources.map((resource) => ({ file, resource })));
  const ofType = (type: string, options: { existing?: boolean } = {}) =>
    all.filter(
      ({ resource }) => resource.type === type && (options.existing === undefined || resource.existing === options.existing),
    );
  const allCode = parsed.map((file) => file.code).join('\n');
  const main = parsed.find((file) => file.path === MAIN_BICEP);
  if (!main) {
    report('files', MAIN_BICEP, 'is missing');
    return problems;
  }

  // Key material, anywhere in any file (comments included).
  for (const file of parsed) {
    if (/\blist(Keys|AccountSas|ServiceSas)\s*\(/i.test(file.raw))
      report('no-list-keys', file.path, 'calls listKeys/listAccountSas/listServiceSas');
    for (const [pattern, what] of [
      [/AccountKey\s*=/i, 'AccountKey='],
      [/SharedAccessSignature/i, 'SharedAccessSignature'],
      [/(^|[?&;\s'"])sig=/im, 'a SAS signature (sig=)'],
      [/DefaultEndpointsProtocol\s*=/i, 'a storage connection string'],
    ] as const) {
      if (pattern.test(file.raw)) report('no-key-material', file.path, `contains ${what}`);
    }
  }

  // Nothing may answer without a key: no anonymous function, no anonymous access through App Service authentication.
  for (const file of parsed) {
    if (/'anonymous'|\bAllowAnonymous\b/i.test(file.code)) report('no-anonymous', file.path, 'allows anonymous access');
  }

  // Modules: every referenced file is here, and deployed; at subscription scope each one names its scope.
  if (!['subscription', 'resourceGroup'].includes(main.targetScope)) {
    report('target-scope', main.path, `targetScope is ${main.targetScope}; use subscription or resourceGroup`);
  }
  const deployed = new Set(
    parsed.flatMap((file) => file.modules.map((module) => posix.normalize(posix.join(posix.dirname(file.path), module.path)))),
  );
  for (const file of parsed) {
    if (file !== main && !deployed.has(file.path)) report('modules', file.path, 'no module deploys it');
  }
  for (const file of parsed) {
    for (const module of file.modules) {
      const target = posix.normalize(posix.join(posix.dirname(file.path), module.path));
      if (!(target in files)) report('modules', file.path, `module ${module.symbol} points at ${target}, which is not there`);
      if (file.targetScope === 'subscription' && !/\bscope\s*:/.test(module.body)) {
        report('target-scope', file.path, `module ${module.symbol} has no scope, so it would deploy at subscription scope`);
      }
    }
  }

  // Storage account.
  const accounts = ofType('Microsoft.Storage/storageAccounts', { existing: false });
  if (accounts.length === 0) report('storage-account', ALL_BICEP, 'no storage account is created');
  for (const { file, resource } of accounts) {
    const has = (pattern: RegExp) => pattern.test(resource.body);
    if (!has(/\ballowSharedKeyAccess\s*:\s*false\b/))
      report('storage-shared-key', file.path, `${resource.symbol}: allowSharedKeyAccess must be false`);
    if (!has(/\bminimumTlsVersion\s*:\s*'TLS1_2'/))
      report('storage-tls', file.path, `${resource.symbol}: minimumTlsVersion must be 'TLS1_2'`);
    if (!has(/\ballowBlobPublicAccess\s*:\s*false\b/))
      report('storage-public-blob', file.path, `${resource.symbol}: allowBlobPublicAccess must be false`);
    if (!has(/\bsupportsHttpsTrafficOnly\s*:\s*true\b/))
      report('storage-https-only', file.path, `${resource.symbol}: supportsHttpsTrafficOnly must be true`);
    if (!has(/\bdefaultToOAuthAuthentication\s*:\s*true\b/)) {
      report('storage-oauth-default', file.path, `${resource.symbol}: defaultToOAuthAuthentication must be true`);
    }
  }
  for (const { file, resource } of ofType('Microsoft.Storage/storageAccounts/blobServices/containers')) {
    const access = /\bpublicAccess\s*:\s*'([^']*)'/.exec(resource.body)?.[1];
    if (access !== undefined && access !== 'None')
      report('container-public-access', file.path, `${resource.symbol}: publicAccess is '${access}'`);
  }
  for (const suffix of expect.hubSuffixes) {
    if (!new RegExp(`'\\$\\{hubName\\}${escapeRegExp(suffix)}'`).test(main.code)) {
      report('hub-resources', main.path, `nothing is named '\${hubName}${suffix}'`);
    }
  }
  for (const [name, value] of [
    ['leaseContainerName', expect.leaseContainer],
    ['auditContainerName', expect.auditContainer],
  ] as const) {
    // A parameter (BATON_LEASE_CONTAINER, BATON_AUDIT_CONTAINER) whose default is Baton's.
    if (!new RegExp(`\\b(?:var\\s+${name}|param\\s+${name}\\s+string)\\s*=\\s*'${escapeRegExp(value)}'`).test(main.code)) {
      report('hub-resources', main.path, `${name} must be '${value}', Baton's default`);
    }
  }

  // Roles: which, and where. The app's identity is the principal of type 'ServicePrincipal'; the
  // optional deployer's assignments take their principal and its type from parameters.
  const roleAssignments = ofType('Microsoft.Authorization/roleAssignments');
  const roleIdsOf = (file: ParsedBicep, body: string) => {
    const definition = /\broleDefinitionId\s*:\s*([^\n]+)/.exec(body)?.[1] ?? '';
    const ids = [...definition.matchAll(/[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}/gi)].map((m) => m[0].toLowerCase());
    // Through a var, or through the var a loop runs over.
    const names = [...definition.matchAll(/\b([A-Za-z_]\w*)\b/g)].map((m) => m[1] as string);
    const loop = /^\s*\[\s*for\s+(\w+)\s+in\s+(\w+)\s*:/.exec(body);
    const viaLoop = loop && names.includes(loop[1] as string) ? (file.vars.get(loop[2] as string) ?? '') : '';
    for (const text of [...names.map((name) => file.vars.get(name) ?? ''), viaLoop]) {
      for (const m of text.matchAll(/\b([A-Za-z_]\w*)\b|'([0-9a-f-]{36})'/gi)) {
        const value = m[2] ?? file.vars.get(m[1] as string)?.replace(/^'|'$/g, '');
        if (value && /^[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$/i.test(value)) ids.push(value.toLowerCase());
      }
    }
    return ids;
  };
  const appRoleIds = new Set(
    roleAssignments
      .filter(({ resource }) => /\bprincipalType\s*:\s*'ServicePrincipal'/.test(resource.body))
      .flatMap(({ file, resource }) => roleIdsOf(file, resource.body)),
  );
  const roleIdIn = (id: string) => appRoleIds.has(id);
  if (!roleIdIn(ROLE.storageBlobDataOwner) && !roleIdIn(ROLE.storageBlobDataContributor)) {
    report('role-blob-data', ALL_BICEP, 'no Storage Blob Data Owner or Contributor role is assigned');
  }
  if (!roleIdIn(ROLE.storageQueueDataContributor))
    report('role-queue-data', ALL_BICEP, 'Storage Queue Data Contributor is not assigned');
  for (const [id, name] of Object.entries(FORBIDDEN_ROLES)) {
    for (const file of parsed)
      if (file.raw.toLowerCase().includes(id)) report('role-forbidden', file.path, `mentions the ${name} role (${id})`);
  }
  for (const { file, resource } of roleAssignments) {
    const scope = /\bscope\s*:\s*([^\n]+)/.exec(resource.body)?.[1]?.trim();
    if (scope === undefined) {
      report('role-scope', file.path, `${resource.symbol} has no scope, so it applies to the whole ${file.targetScope}`);
    } else if (!/^[A-Za-z_]\w*$/.test(scope)) {
      report('role-scope', file.path, `${resource.symbol} is scoped to ${scope}, not to a resource`);
    } else {
      const target = file.resources.find((r) => r.symbol === scope);
      const allowed = target && ROLE_SCOPE_TYPES.some((type) => target.type === type || target.type.startsWith(`${type}/`));
      if (!allowed) {
        report(
          'role-scope',
          file.path,
          `${resource.symbol} is scoped to ${scope}, which is not the storage account or Application Insights`,
        );
      }
    }
    // The app's identity is a service principal. Only the deployer's may be another type, named
    // by a parameter limited to User, Group or ServicePrincipal.
    const typeParam = /\bprincipalType\s*:\s*([A-Za-z_]\w*)\s*$/m.exec(resource.body)?.[1];
    const principalParam = /\bprincipalId\s*:\s*([A-Za-z_]\w*)\s*$/m.exec(resource.body)?.[1];
    const deployerType =
      typeParam !== undefined &&
      principalParam !== undefined &&
      /deployer/i.test(principalParam) &&
      /@allowed\(\[\s*'User'\s+'Group'\s+'ServicePrincipal'\s*\]\)/.test(
        file.params.find((p) => p.name === typeParam)?.decorators ?? '',
      );
    if (!/\bprincipalType\s*:\s*'ServicePrincipal'/.test(resource.body) && !deployerType) {
      report('role-principal-type', file.path, `${resource.symbol}: principalType must be 'ServicePrincipal'`);
    }
    if (!/^\s*(?:\[\s*for\s+\w+\s+in\s+\w+\s*:\s*)?\{\s*name\s*:\s*guid\(/.test(resource.body))
      report('role-name-guid', file.path, `${resource.symbol}: name must be guid(...)`);
  }

  // Storage Table Data Contributor: granted exactly when BATON_ENGINE is durable.
  const engineParam = main.params.find((p) => p.decorators.includes("@description('BATON_ENGINE:"))?.name;
  const tableRoles = parsed.flatMap((file) => {
    const names = [
      TABLE_DATA_CONTRIBUTOR,
      ...[...file.vars].filter(([, value]) => value === `'${TABLE_DATA_CONTRIBUTOR}'`).map(([name]) => name),
    ];
    return file.resources
      .filter(
        (r) => r.type === 'Microsoft.Authorization/roleAssignments' && names.some((n) => new RegExp(`\\b${n}\\b`).test(r.body)),
      )
      .map((resource) => ({ file, resource }));
  });
  if (tableRoles.length === 0) {
    report(
      'role-table-data',
      ALL_BICEP,
      'Storage Table Data Contributor is not assigned: the durable engine keeps its task hub in tables',
    );
  }
  for (const { file, resource } of tableRoles) {
    const condition = resource.condition === undefined ? undefined : passedFrom(main, file, resource.condition);
    if (!engineParam || condition === undefined || !new RegExp(`^${engineParam}\\s*==\\s*'durable'$`).test(condition)) {
      report(
        'role-table-data',
        file.path,
        `${resource.symbol} must be deployed if (and only if) BATON_ENGINE (${engineParam ?? 'no parameter'}) is 'durable'`,
      );
    }
  }

  // Identity.
  if (ofType('Microsoft.ManagedIdentity/userAssignedIdentities', { existing: false }).length === 0) {
    report('identity', ALL_BICEP, 'no user-assigned identity is created');
  }

  // The function app.
  const plans = ofType('Microsoft.Web/serverfarms', { existing: false });
  const isFlex = (body: string) => {
    const sku = block(body, 'sku');
    return /\bname\s*:\s*'FC1'/.test(sku) && /\btier\s*:\s*'FlexConsumption'/.test(sku);
  };
  if (plans.length === 0 || !plans.every(({ resource }) => isFlex(resource.body))) {
    report('flex-plan', ALL_BICEP, "the plan must be sku FC1, tier 'FlexConsumption'");
  }
  const sites = ofType('Microsoft.Web/sites', { existing: false });
  if (sites.length !== 1) report('flex-site', ALL_BICEP, `expected one function app, found ${sites.length}`);
  for (const { file, resource } of sites) {
    const body = resource.body;
    const config = block(body, 'functionAppConfig');
    if (!/\bkind\s*:\s*'functionapp,linux'/.test(body) || !config) {
      report('flex-site', file.path, `${resource.symbol}: kind must be 'functionapp,linux' with a functionAppConfig`);
    }
    const runtime = block(config, 'runtime');
    if (!/\bname\s*:\s*'node'/.test(runtime) || !/\bversion\s*:\s*'22'/.test(runtime)) {
      report('flex-runtime', file.path, `${resource.symbol}: runtime must be node 22`);
    }
    const scale = block(config, 'scaleAndConcurrency');
    if (!/\bmaximumInstanceCount\s*:\s*[A-Za-z_]\w*\s*$/m.test(scale) || !/\binstanceMemoryMB\s*:\s*2048\b/.test(scale)) {
      report(
        'flex-scale',
        file.path,
        `${resource.symbol}: maximumInstanceCount must come from a parameter and instanceMemoryMB be 2048`,
      );
    }
    const authentication = block(block(block(config, 'deployment'), 'storage'), 'authentication');
    if (
      !/\btype\s*:\s*'UserAssignedIdentity'/.test(authentication) ||
      !/\buserAssignedIdentityResourceId\s*:/.test(authentication)
    ) {
      report(
        'flex-deployment-identity',
        file.path,
        `${resource.symbol}: the deployment container must be read with the user-assigned identity`,
      );
    }
    if (!/\bhttpsOnly\s*:\s*true\b/.test(body)) report('https-only', file.path, `${resource.symbol}: httpsOnly must be true`);
    if (!/\bminTlsVersion\s*:\s*'1\.[23]'/.test(block(body, 'siteConfig'))) {
      report('site-tls', file.path, `${resource.symbol}: siteConfig.minTlsVersion must be '1.2' or later`);
    }
    if (!/\btype\s*:\s*'UserAssigned'/.test(block(body, 'identity')))
      report('identity', file.path, `${resource.symbol}: identity type must be 'UserAssigned'`);
    if (!/'azd-service-name'\s*:\s*'[^']+'/.test(body))
      report('tags', file.path, `${resource.symbol}: no literal azd-service-name tag`);
  }
  const policies = ofType('Microsoft.Web/sites/basicPublishingCredentialsPolicies', { existing: false });
  for (const method of ['ftp', 'scm']) {
    const policy = policies.find(({ resource }) => new RegExp(`\\bname\\s*:\\s*'${method}'`).test(resource.body));
    if (!policy || !/\ballow\s*:\s*false\b/.test(policy.resource.body)) {
      report(
        'basic-auth',
        policy?.file.path ?? ALL_BICEP,
        `basic publishing credentials for ${method} must be disabled (allow: false)`,
      );
    }
  }
  if (!/'azd-env-name'\s*:\s*environmentName\b/.test(main.code))
    report('tags', main.path, "tags must carry 'azd-env-name': environmentName");

  // App settings.
  for (const name of IDENTITY_SETTINGS) {
    if (!setsAppSetting(allCode, name)) report('app-settings-identity', ALL_BICEP, `${name} is not set`);
  }
  if (!/AzureWebJobsStorage__credential'?\s*:\s*'managedidentity'/.test(allCode)) {
    report('app-settings-credential', ALL_BICEP, "AzureWebJobsStorage__credential must be 'managedidentity'");
  }
  // Outside the public cloud the host needs the URIs (it assumes the public suffix for a name):
  // a var that is empty in the public cloud may set them.
  const sovereignOnly = parsed.flatMap((file) =>
    [...file.vars.values()].filter((value) => /^environment\(\)\.name\s*==\s*'AzureCloud'\s*\?\s*\{\s*\}\s*:/.test(value)),
  );
  const publicCloudCode = sovereignOnly.reduce((code, value) => code.replace(value, ''), allCode);
  for (const m of publicCloudCode.matchAll(/(?:^|[\s{,])'?(AzureWebJobsStorage__\w*ServiceUri)'?\s*:/gm)) {
    report(
      'app-settings-host-storage',
      ALL_BICEP,
      `${m[1]} is set: the host's connection takes AzureWebJobsStorage__accountName alone`,
    );
  }
  if (/(?:^|[\s{,])'?AzureWebJobsStorage'?\s*:|'AzureWebJobsStorage'/m.test(allCode)) {
    report('app-settings-plain-connection', ALL_BICEP, 'AzureWebJobsStorage is set as a connection string');
  }
  for (const name of FLEX_DEPRECATED_SETTINGS) {
    if (setsAppSetting(allCode, name))
      report('app-settings-flex-deprecated', ALL_BICEP, `${name} is not used by Flex Consumption`);
  }
  for (const m of allCode.matchAll(/(?:^|[\s{,])'?(BATON_[A-Z0-9_]+)'?\s*:/gm)) {
    const name = m[1] as string;
    if (!(name in expect.batonSettings))
      report('app-settings-baton', ALL_BICEP, `${name} is set, but Baton reads no such setting`);
  }
  const authString = /APPLICATIONINSIGHTS_AUTHENTICATION_STRING'?\s*:\s*'([^'\n]*)'/.exec(allCode)?.[1];
  if (!setsAppSetting(allCode, 'APPLICATIONINSIGHTS_CONNECTION_STRING')) {
    report('app-insights-entra', ALL_BICEP, 'APPLICATIONINSIGHTS_CONNECTION_STRING is not set');
  }
  if (authString === undefined || !/\bAuthorization=AAD\b/.test(authString) || !/ClientId=\$\{/.test(authString)) {
    report(
      'app-insights-entra',
      ALL_BICEP,
      "APPLICATIONINSIGHTS_AUTHENTICATION_STRING must be 'ClientId=${...};Authorization=AAD'",
    );
  }
  if (!roleIdIn(ROLE.monitoringMetricsPublisher))
    report('app-insights-entra', ALL_BICEP, 'Monitoring Metrics Publisher is not assigned');
  const components = ofType('Microsoft.Insights/components', { existing: false });
  if (components.length === 0 || !components.every(({ resource }) => /\bDisableLocalAuth\s*:\s*true\b/.test(resource.body))) {
    report('app-insights-entra', ALL_BICEP, 'Application Insights must set DisableLocalAuth: true');
  }
  if (setsAppSetting(allCode, 'APPINSIGHTS_INSTRUMENTATIONKEY')) {
    report('app-insights-entra', ALL_BICEP, 'APPINSIGHTS_INSTRUMENTATIONKEY is the legacy key setting');
  }

  // Outputs end up in .azure/<env>/.env and the deployment history.
  for (const file of parsed) {
    for (const output of file.outputs) {
      const secretish = /key|secret|connectionstring|password|\bsas\b|sig=/i;
      if (secretish.test(output.name) || secretish.test(output.value)) {
        report('outputs-secret', file.path, `output ${output.name} looks like a credential: ${output.value.split('\n')[0]}`);
      }
    }
  }

  // Parameters of main.bicep.
  const param = (name: string) => main.params.find((p) => p.name === name);
  const checkParam = (name: string, decorators: readonly string[], defaultValue: string | undefined) => {
    const p = param(name);
    if (!p) {
      report('params', main.path, `parameter ${name} is missing`);
      return;
    }
    for (const decorator of decorators) {
      if (!p.decorators.includes(decorator)) report('params', main.path, `${name} needs ${decorator}`);
    }
    if (!/@description\(/.test(p.decorators)) report('params', main.path, `${name} needs a @description`);
    if (defaultValue !== undefined && p.value !== defaultValue) {
      report('params', main.path, `${name} defaults to ${p.value || 'nothing'}, expected ${defaultValue}`);
    }
  };
  checkParam('environmentName', [], undefined);
  checkParam('location', [], undefined);
  checkParam('hubName', ['@minLength(1)', '@maxLength(51)'], `'${expect.hub}'`);
  checkParam('coordinatorSchedule', [], `'${expect.coordinatorSchedule}'`);
  checkParam('leaseSeconds', ['@minValue(15)', '@maxValue(60)'], String(expect.leaseSeconds));
  checkParam('maximumInstanceCount', ['@minValue(1)', '@maxValue(1000)'], String(expect.maximumInstanceCount));

  return problems;
}

// --- Baton's settings, end to end ------------------------------------------------------------

/**
 * Every setting Baton reads can be set with `azd env set`, and survives `azd provision`: a
 * main.bicep parameter documented as the setting, with Baton's default, mapped from the azd
 * variable of the same name in main.parameters.json, handed to the module that writes the app
 * setting, and written from that parameter.
 */
export function lintBatonSettings(files: InfraFiles, expect: Pick<InfraExpectations, 'batonSettings'>): string[] {
  const problems: string[] = [];
  const report = (rule: string, file: string, message: string) => problems.push(`${rule}: ${file}: ${message}`);
  const mainRaw = files.bicep[MAIN_BICEP];
  if (mainRaw === undefined) return problems;
  const main = parseBicep(MAIN_BICEP, mainRaw);
  const parsed = Object.entries(files.bicep).map(([path, raw]) => (path === MAIN_BICEP ? main : parseBicep(path, raw)));
  let azd: Record<string, { value?: unknown }> = {};
  try {
    azd = (JSON.parse(files.parametersJson) as { parameters?: typeof azd }).parameters ?? {};
  } catch {
    // lintParameters reports it.
  }
  const appSettingsFile = (name: string) => parsed.find((file) => appSettingValue(file.code, name) !== undefined);
  const sourceOf = (name: string): { file: ParsedBicep; param: string; fromMain: string | undefined } | undefined => {
    const file = appSettingsFile(name);
    const value = file && appSettingValue(file.code, name);
    const param = file && value !== undefined ? file.params.find((p) => mentions(value, p.name))?.name : undefined;
    if (!file || !param) return undefined;
    return { file, param, fromMain: passedFrom(main, file, param) };
  };

  for (const [name, expectedDefault] of Object.entries(expect.batonSettings)) {
    const param = main.params.find((p) => p.decorators.includes(`@description('${name}:`));
    if (!param) {
      report('baton-settings-param', main.path, `no parameter is documented as ${name} (@description('${name}: ...'))`);
    } else {
      if (param.value !== expectedDefault) {
        report(
          'baton-settings-param',
          main.path,
          `${param.name} (${name}) defaults to ${param.value || 'nothing'}, Baton's default is ${expectedDefault}`,
        );
      }
      if (azd[param.name]?.value !== `\${${name}}`) {
        report(
          'baton-settings-azd',
          'infra/main.parameters.json',
          `${param.name} must be "\${${name}}", so azd env set ${name} reaches it`,
        );
      }
    }
    const file = appSettingsFile(name);
    if (!file) {
      report('app-settings-baton', ALL_BICEP, `${name} is not set`);
      continue;
    }
    const source = sourceOf(name);
    if (!param || !source || source.fromMain === undefined || !mentions(source.fromMain, param.name)) {
      report('baton-settings-wiring', file.path, `${name} is not written from main.bicep's ${param?.name ?? name} parameter`);
    }
  }

  // Settings written beside Baton's, from the same parameters.
  const attempts = sourceOf('BATON_MAX_ATTEMPTS');
  const dequeue = attempts && appSettingValue(attempts.file.code, MAX_DEQUEUE_OVERRIDE);
  if (!attempts || dequeue === undefined || !mentions(dequeue, attempts.param)) {
    report(
      'app-settings-max-dequeue',
      attempts?.file.path ?? ALL_BICEP,
      `${MAX_DEQUEUE_OVERRIDE} must follow BATON_MAX_ATTEMPTS`,
    );
  }
  const logLevel = sourceOf('BATON_LOG_LEVEL');
  const overrides = parsed.flatMap((file) => [...file.code.matchAll(new RegExp(`\\b${FUNCTION_LOG_LEVEL_OVERRIDE}\\b`, 'g'))]);
  const debugVar =
    logLevel &&
    new RegExp(
      `\\bvar\\s+(\\w+)\\s*=\\s*${logLevel.param}\\s*==\\s*'debug'\\s*\\?\\s*\\{\\s*${FUNCTION_LOG_LEVEL_OVERRIDE}\\s*:\\s*'Debug'\\s*\\}\\s*:\\s*\\{\\s*\\}`,
    ).exec(logLevel.file.code)?.[1];
  const settingsResource = logLevel?.file.resources.find(
    (r) => r.type === 'Microsoft.Web/sites/config' && /\bname\s*:\s*'appsettings'/.test(r.body),
  );
  if (!debugVar || !settingsResource || !mentions(settingsResource.body, debugVar) || overrides.length !== 1) {
    report(
      'app-settings-debug-log',
      logLevel?.file.path ?? ALL_BICEP,
      `${FUNCTION_LOG_LEVEL_OVERRIDE} must be 'Debug' when BATON_LOG_LEVEL is debug, and unset otherwise`,
    );
  }
  return problems;
}

// --- alerts and workbook --------------------------------------------------------------------

/**
 * The five alerts (no leader, a run failed or timed out, fencing refusals, a scheduled occurrence
 * not run, a scheduled run started late) and the workbook, all on the Application Insights
 * component, none with a fixed address to notify.
 */
export function lintMonitoring(files: Record<string, string>): string[] {
  const problems: string[] = [];
  const report = (rule: string, file: string, message: string) => problems.push(`${rule}: ${file}: ${message}`);
  const parsed = Object.entries(files).map(([path, raw]) => parseBicep(path, raw));
  const all = parsed.flatMap((file) => file.resources.filter((r) => !r.existing).map((resource) => ({ file, resource })));
  const isComponent = (file: ParsedBicep, expr: string) =>
    file.resources.some(
      (r) =>
        r.type === 'Microsoft.Insights/components' &&
        new RegExp(`^(?:${r.symbol}\\.id|toLower\\(${r.symbol}\\.id\\))$`).test(expr.trim()),
    );
  const field = (body: string, key: string) => new RegExp(`\\b${key}\\s*:\\s*'([^']*)'`).exec(body)?.[1];

  const rules = all.filter(({ resource }) => resource.type === 'Microsoft.Insights/scheduledQueryRules');
  if (rules.length !== 5) report('alerts', ALL_BICEP, `expected five scheduled query rules, found ${rules.length}`);
  const find = (signal: string) => rules.filter(({ resource }) => resource.body.includes(`"${signal}"`));
  const expected = [
    {
      what: 'no leader',
      signal: 'baton.leader.transitions',
      table: 'customMetrics',
      // A resting lease (an idle leader between occurrences) is not a missing leader.
      must: ['"acquired"', '"baton.leader.is_leader"', '"baton.leader.resting_ticks"'],
    },
    { what: 'a run failed or timed out', signal: 'baton.run.ended', table: 'customEvents', must: ['"failed"', '"timed-out"'] },
    { what: 'fencing refusals', signal: 'baton.fencing.refusals', table: 'customMetrics', must: ['valueSum'] },
    { what: 'an occurrence not run', signal: 'baton.schedule.not_run', table: 'customEvents', must: ['customDimensions.job'] },
    { what: 'a run started late', signal: 'baton.schedule.start_lag', table: 'customMetrics', must: ['valueMax'] },
  ];
  for (const { what, signal, table, must } of expected) {
    const found = find(signal);
    if (found.length !== 1) {
      report('alerts', ALL_BICEP, `expected one alert on ${signal} (${what}), found ${found.length}`);
      continue;
    }
    const { file, resource } = found[0] as (typeof found)[number];
    const body = resource.body;
    for (const text of [table, ...must]) {
      if (!body.includes(text)) report('alerts-query', file.path, `${resource.symbol} (${what}): its query must read ${text}`);
    }
    const scopes = (/\bscopes\s*:\s*\[([^\]]*)\]/.exec(body)?.[1] ?? '')
      .split(/[\n,]/)
      .map((scope) => scope.trim())
      .filter(Boolean);
    if (scopes.length !== 1 || !isComponent(file, scopes[0] as string)) {
      report(
        'alerts-scope',
        file.path,
        `${resource.symbol} (${what}) must be scoped to the Application Insights component alone`,
      );
    }
    const frequency = minutesOf(field(body, 'evaluationFrequency'));
    const window = minutesOf(field(body, 'windowSize'));
    const ago = [...body.matchAll(/\bago\(([^)]*)\)/g)].map((m) => m[1]);
    if (!(frequency <= 5) || !(window >= frequency)) {
      report(
        'alerts-window',
        file.path,
        `${resource.symbol} (${what}) must be evaluated every 5 minutes or less over a window at least as long`,
      );
    }
    if (signal === 'baton.leader.transitions' && (window !== 5 || ago.length === 0 || ago.some((span) => span !== '5m'))) {
      report(
        'alerts-window',
        file.path,
        `${resource.symbol} (${what}) must look at the last 5 minutes exactly (windowSize PT5M, ago(5m))`,
      );
    }
    // The criterion's operator, not a dimension's (Include or Exclude).
    const operator = /\boperator\s*:\s*'(?!Include'|Exclude')([^']*)'/.exec(body)?.[1];
    const threshold = /\bthreshold\s*:\s*([\w.]+)/.exec(body)?.[1];
    if (signal === 'baton.schedule.start_lag') {
      // The one alert on a level: the deployer says how late is too late.
      const fromParameter = file.params.some((p) => p.name === threshold);
      if (operator !== 'GreaterThan' || !fromParameter || field(body, 'timeAggregation') !== 'Maximum') {
        report(
          'alerts-condition',
          file.path,
          `${resource.symbol} (${what}) must fire when the largest lag is above a threshold from a parameter (Maximum, GreaterThan)`,
        );
      }
    } else if (operator !== 'GreaterThan' || threshold !== '0') {
      report(
        'alerts-condition',
        file.path,
        `${resource.symbol} (${what}) must fire when its query finds anything (GreaterThan 0)`,
      );
    }
    if (
      signal === 'baton.fencing.refusals' &&
      (field(body, 'timeAggregation') !== 'Total' || !field(body, 'metricMeasureColumn'))
    ) {
      report(
        'alerts-condition',
        file.path,
        `${resource.symbol} (${what}) must add up the refusals (timeAggregation Total of a column)`,
      );
    }
    if (!/\bactions\s*:\s*\{[^}]*\bactionGroups\s*:/.test(body)) {
      report('alerts-notify', file.path, `${resource.symbol} (${what}) names no action groups`);
    }
  }
  // Who gets told is the deployer's to say: no address in the templates, and no action group
  // unless one was given.
  for (const file of parsed) {
    for (const m of file.code.matchAll(/[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g)) {
      report('alerts-notify', file.path, `a fixed e-mail address: ${m[0]}`);
    }
  }
  for (const { file, resource } of all.filter(({ resource }) => resource.type === 'Microsoft.Insights/actionGroups')) {
    if (resource.condition === undefined)
      report('alerts-notify', file.path, `${resource.symbol} is created even when no address was given`);
    for (const m of resource.body.matchAll(/\bemailAddress\s*:\s*([^\n]+)/g)) {
      if (!file.params.some((p) => (m[1] as string).trim() === p.name)) {
        report('alerts-notify', file.path, `${resource.symbol} must take its address from a parameter`);
      }
    }
  }

  const workbooks = all.filter(({ resource }) => resource.type === 'Microsoft.Insights/workbooks');
  if (workbooks.length !== 1) report('workbook', ALL_BICEP, `expected one workbook, found ${workbooks.length}`);
  for (const { file, resource } of workbooks) {
    const source = /\bsourceId\s*:\s*([^\n]+)/.exec(resource.body)?.[1] ?? '';
    if (!isComponent(file, source))
      report('workbook', file.path, `${resource.symbol} must belong to the Application Insights component`);
    const data = /\bserializedData\s*:\s*string\((\w+)\)/.exec(resource.body)?.[1];
    const content = data === undefined ? '' : (file.vars.get(data) ?? '');
    for (const metric of BATON_METRICS) {
      if (!content.includes(`"${metric}"`)) report('workbook', file.path, `${resource.symbol} does not chart ${metric}`);
    }
  }
  return problems;
}

/** The literal azd-service-name tag on the function app, for azure.yaml to match. */
export function serviceTagOf(files: Record<string, string>): string | undefined {
  for (const [path, raw] of Object.entries(files)) {
    for (const resource of parseBicep(path, raw).resources) {
      if (resource.type !== 'Microsoft.Web/sites' || resource.existing) continue;
      const tag = /'azd-service-name'\s*:\s*'([^']+)'/.exec(resource.body)?.[1];
      if (tag) return tag;
    }
  }
  return undefined;
}

// --- main.parameters.json -------------------------------------------------------------------

export function lintParameters(parametersJson: string, mainBicep: string): string[] {
  const problems: string[] = [];
  const file = 'infra/main.parameters.json';
  const report = (rule: string, message: string) => problems.push(`${rule}: ${file}: ${message}`);
  let doc: { $schema?: unknown; parameters?: Record<string, { value?: unknown }> };
  try {
    doc = JSON.parse(parametersJson) as typeof doc;
  } catch (err) {
    report('params-file', `is not JSON: ${err instanceof Error ? err.message : String(err)}`);
    return problems;
  }
  if (typeof doc.$schema !== 'string' || !doc.$schema.endsWith('/deploymentParameters.json#')) {
    report('params-file', '$schema must be the deploymentParameters schema');
  }
  const values = doc.parameters ?? {};
  for (const [name, env] of [
    ['environmentName', '${AZURE_ENV_NAME}'],
    ['location', '${AZURE_LOCATION}'],
  ] as const) {
    if (values[name]?.value !== env) report('params-file-azd', `${name} must be "${env}"`);
  }
  const declared = parseBicep(MAIN_BICEP, mainBicep).params;
  for (const [name, entry] of Object.entries(values)) {
    if (!declared.some((p) => p.name === name)) report('params-file-unknown', `${name} is not a parameter of main.bicep`);
    if (typeof entry.value === 'string' && entry.value.includes('$') && !/^\$\{[A-Z][A-Z0-9_]*\}$/.test(entry.value)) {
      report('params-file-azd', `${name} must be one azd variable, "\${NAME}"`);
    }
  }
  for (const p of declared) {
    if (p.value === '' && !(p.name in values)) report('params-file-required', `${p.name} has no default and no value here`);
  }
  return problems;
}

// --- host.json ------------------------------------------------------------------------------

export function lintHostJson(hostJson: string, expect: Pick<InfraExpectations, 'maxAttempts'>): string[] {
  const problems: string[] = [];
  const report = (rule: string, message: string) => problems.push(`${rule}: host.json: ${message}`);
  let host: {
    version?: unknown;
    logging?: {
      logLevel?: Record<string, unknown>;
      applicationInsights?: { samplingSettings?: { isEnabled?: unknown; excludedTypes?: unknown } };
    };
    extensionBundle?: { id?: unknown; version?: unknown };
    extensions?: {
      queues?: { messageEncoding?: unknown; maxDequeueCount?: unknown };
      durableTask?: { hubName?: unknown };
    };
  };
  try {
    host = JSON.parse(hostJson) as typeof host;
  } catch (err) {
    report('host-json', `is not JSON: ${err instanceof Error ? err.message : String(err)}`);
    return problems;
  }
  if (host.version !== '2.0') report('host-version', 'version must be "2.0"');
  if (host.extensionBundle?.id !== 'Microsoft.Azure.Functions.ExtensionBundle') {
    report('host-bundle', 'extensionBundle.id must be Microsoft.Azure.Functions.ExtensionBundle');
  }
  // Flex Consumption needs bundle 4 or later for languages other than C#.
  const range = /^\[(\d+)(?:\.(?:\d+|\*))*,\s*(\d+)(?:\.\d+)*\)$/.exec(String(host.extensionBundle?.version ?? ''));
  if (!range || Number(range[1]) < 4 || Number(range[2]) <= Number(range[1])) {
    report('host-bundle', `extensionBundle.version must be a range from 4 up, such as "[4.*, 5.0.0)"`);
  }
  const queues = host.extensions?.queues;
  if (queues?.messageEncoding !== 'none')
    report('host-queues-encoding', 'extensions.queues.messageEncoding must be "none": Baton sends plain JSON');
  if (queues?.maxDequeueCount !== expect.maxAttempts) {
    report('host-max-dequeue', `extensions.queues.maxDequeueCount must be ${expect.maxAttempts}, BATON_MAX_ATTEMPTS's default`);
  }
  // The host resolves %...% from app settings, so the task hub is named after Baton's hub.
  if (host.extensions?.durableTask?.hubName !== '%BATON_HUB%') {
    report('host-durable-hub', 'extensions.durableTask.hubName must be "%BATON_HUB%", so the task hub follows the hub');
  }
  // Baton logs to the console. The host reads the worker's stdout (console.info, console.log and
  // console.debug alike) as Information in Host.Function.Console, so that category must pass
  // Information for BATON_LOG_LEVEL=debug to show anything; a function's own context.debug lines
  // are Debug in Function.<name>.User and stay out unless the app settings raise it.
  const levels = host.logging?.logLevel ?? {};
  const consoleLevel = effectiveLogLevel(levels, 'Host.Function.Console');
  if (consoleLevel === undefined || consoleLevel > LOG_LEVELS.indexOf('Information')) {
    report('host-log-level', "Baton's console lines (Host.Function.Console, Information) must pass logging.logLevel");
  }
  const functionLevel = effectiveLogLevel(levels, 'Function.baton-coordinator.User');
  if (functionLevel === undefined || functionLevel < LOG_LEVELS.indexOf('Information')) {
    report(
      'host-log-level',
      "functions' Debug lines (Function.<name>.User) must stay out by default: logging.logLevel Information or above",
    );
  }
  const sampling = host.logging?.applicationInsights?.samplingSettings;
  const excluded = String(sampling?.excludedTypes ?? '')
    .split(';')
    .map((type) => type.trim());
  if (sampling?.isEnabled !== false && !excluded.includes('Event')) {
    report(
      'host-sampling',
      'logging.applicationInsights.samplingSettings.excludedTypes must include Event: custom events are never sampled',
    );
  }
  return problems;
}

const LOG_LEVELS = ['Trace', 'Debug', 'Information', 'Warning', 'Error', 'Critical', 'None'];

/**
 * The index in LOG_LEVELS of the level host.json gives `category`: the longest matching category
 * prefix, else `default`, else the host's own default (Information); undefined for a level name
 * the host would not accept.
 */
function effectiveLogLevel(levels: Record<string, unknown>, category: string): number | undefined {
  const keys = Object.keys(levels).filter(
    (key) => key.toLowerCase() === category.toLowerCase() || category.toLowerCase().startsWith(`${key.toLowerCase()}.`),
  );
  const key = keys.sort((a, b) => b.length - a.length)[0] ?? Object.keys(levels).find((k) => k.toLowerCase() === 'default');
  if (key === undefined) return LOG_LEVELS.indexOf('Information');
  const index = LOG_LEVELS.findIndex((level) => level.toLowerCase() === String(levels[key]).toLowerCase());
  return index < 0 ? undefined : index;
}

// --- azure.yaml -----------------------------------------------------------------------------

type YamlValue = string | YamlMap;
interface YamlMap {
  [key: string]: YamlValue;
}

/**
 * Block mappings of scalars, which is all azure.yaml here uses; anything else (lists, flow
 * collections, anchors, multi-line scalars) is refused rather than misread.
 */
export function parseSimpleYaml(text: string): YamlMap {
  const root: YamlMap = {};
  const stack: { indent: number; map: YamlMap }[] = [{ indent: -1, map: root }];
  let pendingMap: { indent: number; map: YamlMap } | undefined;
  for (const [index, line] of text.split(/\r?\n/).entries()) {
    const where = `line ${index + 1}`;
    if (/^\s*(#.*)?$/.test(line)) continue;
    if (line.includes('\t')) throw new Error(`${where}: tabs are not YAML indentation`);
    const m = /^( *)([A-Za-z0-9_.-]+):(?: +(.*))?$/.exec(line);
    if (!m) throw new Error(`${where}: only "key: value" lines are supported`);
    const indent = (m[1] as string).length;
    const key = m[2] as string;
    if (pendingMap) {
      if (indent <= pendingMap.indent) throw new Error(`${where}: the key above has no value`);
      stack.push(pendingMap);
      pendingMap = undefined;
    }
    while (stack.length > 1 && indent <= (stack[stack.length - 1] as { indent: number }).indent) stack.pop();
    const parent = (stack[stack.length - 1] as { map: YamlMap }).map;
    if (key in parent) throw new Error(`${where}: ${key} appears twice`);
    const rest = (m[3] ?? '').trim();
    if (rest === '' || rest.startsWith('#')) {
      const child: YamlMap = {};
      parent[key] = child;
      pendingMap = { indent, map: child };
      continue;
    }
    parent[key] = parseScalar(rest, where);
  }
  if (pendingMap) throw new Error('the last key has no value');
  return root;
}

function parseScalar(text: string, where: string): string {
  const quoted = /^(["'])(.*)\1\s*(#.*)?$/.exec(text);
  if (quoted) return quoted[2] as string;
  if (/^[[{&*!|>"'-]/.test(text)) throw new Error(`${where}: "${text}" is not a plain scalar`);
  return text.replace(/\s+#.*$/, '').trim();
}

export function lintAzureYaml(azureYaml: string, serviceTag: string | undefined, expect: InfraExpectations): string[] {
  const problems: string[] = [];
  const report = (rule: string, message: string) => problems.push(`${rule}: azure.yaml: ${message}`);
  if (azureYaml.split(/\r?\n/)[0] !== AZURE_YAML_SCHEMA_LINE)
    report('yaml-schema', `the first line must be: ${AZURE_YAML_SCHEMA_LINE}`);
  let doc: YamlMap;
  try {
    doc = parseSimpleYaml(azureYaml);
  } catch (err) {
    report('yaml-syntax', err instanceof Error ? err.message : String(err));
    return problems;
  }
  const map = (value: YamlValue | undefined): YamlMap | undefined => (typeof value === 'object' ? value : undefined);
  if (typeof doc.name !== 'string' || doc.name === '') report('yaml-name', 'name must be set');
  const services = map(doc.services) ?? {};
  const names = Object.keys(services);
  if (names.length !== 1) {
    report('yaml-services', `expected one service, found ${names.length}`);
    return problems;
  }
  const name = names[0] as string;
  if (name !== serviceTag)
    report('yaml-service-tag', `service ${name} must match the function app's azd-service-name tag (${serviceTag ?? 'none'})`);
  const service = map(services[name]) ?? {};
  for (const [key, value] of [
    ['project', '.'],
    ['language', 'ts'],
    ['host', 'function'],
  ] as const) {
    if (service[key] !== value) report('yaml-service', `services.${name}.${key} must be ${value}`);
  }
  // azd zips `dist` as is: it must be what the hook stages, and hold the entry point.
  if (service.dist !== expect.stageDir)
    report('yaml-package', `services.${name}.dist must be ${expect.stageDir}, where the hook stages the package`);
  if (service.remoteBuild !== 'false')
    report('yaml-package', `services.${name}.remoteBuild must be false: the staged package is complete`);
  if (!expect.stagedPaths.some((path) => expect.packageMain === path || expect.packageMain.startsWith(`${path}/`))) {
    report('yaml-package', `the app's entry (${expect.packageMain}) is not in the staged package`);
  }
  const prepackage = map(map(service.hooks)?.prepackage);
  for (const [platform, shell] of [
    ['posix', 'sh'],
    ['windows', 'pwsh'],
  ] as const) {
    const hook = map(prepackage?.[platform]);
    const script = /^node\s+(\S+)$/.exec(typeof hook?.run === 'string' ? hook.run : '')?.[1];
    if (hook?.shell !== shell || !script || !expect.exists(script)) {
      report('yaml-hook', `hooks.prepackage.${platform} must run an existing script with node, in ${shell}`);
    }
  }
  return problems;
}

/** Every rule over every deployment file. */
export function lintInfra(files: InfraFiles, expect: InfraExpectations): string[] {
  return [
    ...lintBicep(files.bicep, expect),
    ...lintBatonSettings(files, expect),
    ...lintMonitoring(files.bicep),
    ...lintParameters(files.parametersJson, files.bicep[MAIN_BICEP] ?? ''),
    ...lintHostJson(files.hostJson, expect),
    ...lintAzureYaml(files.azureYaml, serviceTagOf(files.bicep), expect),
  ];
}
