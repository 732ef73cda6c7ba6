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

const IDENTITY_SETTINGS = [
  'AzureWebJobsStorage__credential',
  'AzureWebJobsStorage__clientId',
  'AzureWebJobsStorage__blobServiceUri',
  'AzureWebJobsStorage__queueServiceUri',
];

const BATON_SETTINGS = [
  'BATON_HUB',
  'BATON_COORDINATOR_SCHEDULE',
  'BATON_LEASE_SECONDS',
  'BATON_QUEUE_SHARDS',
  'BATON_LEASE_CONTAINER',
  'BATON_AUDIT_CONTAINER',
];

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
    hostJson: readFileSync(join(root, 'host.json'), 'utf8'),
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
    const span = bodyAfter(scanned, (m.index ?? 0) + m[0].length);
    resources.push({ symbol: m[1] as string, type: m[2] as string, existing: m[3] !== undefined, ...span });
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
  const targetScope = /^\s*targetScope\s*=\s*'([^']*)'/m.exec(code)?.[1] ?? 'resourceGroup';
  return {
    ...scanned,
    path,
    targetScope,
    resources,
    modules,
    params: declarations('param'),
    outputs: declarations('output'),
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

  // Modules: every referenced file is here; at subscription scope each one names its scope.
  if (!['subscription', 'resourceGroup'].includes(main.targetScope)) {
    report('target-scope', main.path, `targetScope is ${main.targetScope}; use subscription or resourceGroup`);
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
    if (!new RegExp(`\\bvar\\s+${name}\\s*=\\s*'${escapeRegExp(value)}'`).test(main.code)) {
      report('hub-resources', main.path, `${name} must be '${value}', Baton's default`);
    }
  }

  // Roles: which, and where.
  const roleIdIn = (id: string) => new RegExp(`'${id}'`, 'i').test(allCode);
  if (!roleIdIn(ROLE.storageBlobDataOwner) && !roleIdIn(ROLE.storageBlobDataContributor)) {
    report('role-blob-data', ALL_BICEP, 'no Storage Blob Data Owner or Contributor role is assigned');
  }
  if (!roleIdIn(ROLE.storageQueueDataContributor))
    report('role-queue-data', ALL_BICEP, 'Storage Queue Data Contributor is not assigned');
  for (const [id, name] of Object.entries(FORBIDDEN_ROLES)) {
    for (const file of parsed)
      if (file.raw.toLowerCase().includes(id)) report('role-forbidden', file.path, `mentions the ${name} role (${id})`);
  }
  for (const { file, resource } of ofType('Microsoft.Authorization/roleAssignments')) {
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
    if (!/\bprincipalType\s*:\s*'ServicePrincipal'/.test(resource.body)) {
      report('role-principal-type', file.path, `${resource.symbol}: principalType must be 'ServicePrincipal'`);
    }
    if (!/^\s*\{\s*name\s*:\s*guid\(/.test(resource.body))
      report('role-name-guid', file.path, `${resource.symbol}: name must be guid(...)`);
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
  if (/(?:^|[\s{,])'?AzureWebJobsStorage'?\s*:|'AzureWebJobsStorage'/m.test(allCode)) {
    report('app-settings-plain-connection', ALL_BICEP, 'AzureWebJobsStorage is set as a connection string');
  }
  for (const name of FLEX_DEPRECATED_SETTINGS) {
    if (setsAppSetting(allCode, name))
      report('app-settings-flex-deprecated', ALL_BICEP, `${name} is not used by Flex Consumption`);
  }
  for (const name of BATON_SETTINGS) {
    if (!setsAppSetting(allCode, name)) report('app-settings-baton', ALL_BICEP, `${name} is not set`);
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
    extensionBundle?: { id?: unknown; version?: unknown };
    extensions?: { queues?: { messageEncoding?: unknown; maxDequeueCount?: unknown } };
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
  return problems;
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
    report('yaml-package', `package.json main (${expect.packageMain}) is not in the staged package`);
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
    ...lintParameters(files.parametersJson, files.bicep[MAIN_BICEP] ?? ''),
    ...lintHostJson(files.hostJson, expect),
    ...lintAzureYaml(files.azureYaml, serviceTagOf(files.bicep), expect),
  ];
}
