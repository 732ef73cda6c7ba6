import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fromJson, isCall, literal, sameExpr, show, stringsIn, walk, call, str, type Expr } from './arm-expression';
import {
  DEPLOYMENTS,
  conditionsOf,
  entriesOf,
  field,
  itemsOf,
  loadTemplate,
  moduleOutput,
  rawField,
  rootParameter,
  scopeOf,
  textOf,
  toRoot,
  typeOfId,
  type ArmModel,
  type ArmResource,
  type ArmTemplateJson,
  type Entry,
  type Scope,
} from './arm-template';
import { bicepBuildAll, describeDiagnostics } from './bicep-cli';

/**
 * A lint for the deployment files. The Bicep is read as the compiler leaves it: `bicep build`
 * turns infra/main.bicep and the modules it deploys into one ARM template, and the rules read
 * that template as data (arm-template.ts), so what they check is what Azure would be asked to
 * deploy. These rules are what stands between a change and a key in an app setting or a role at
 * the wrong scope. Every function returns problems, one line each, starting with the rule's id
 * (`rule: file: what`); an empty list means the files pass.
 */

export interface InfraFiles {
  /** infra/main.bicep as `bicep build` compiles it, its modules nested in it. */
  template: ArmTemplateJson;
  /**
   * Each Bicep file's own templateHash, by path from the repository root (`infra/main.bicep`):
   * it names the modules nested in the template, and shows which files no module deploys.
   */
  hashes: Record<string, string>;
  /** The Bicep sources by path, for the few rules that read comments too. */
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
  /** What Baton appends to the hub to name the container the CLI reads and requests runs in (`-runs`). */
  hubContainerSuffix: string;
  /** What Baton appends to the hub to name the queue a trigger wakes the leader on: shard 0's work queue (`-work`). */
  wakeQueueSuffix: string;
  /** Where requests go in the hub container (`requests/`): the only blobs the deployer may write. */
  requestPrefix: string;
  maximumInstanceCount: number;
  /** package.json `main`: the staged package must contain it. */
  packageMain: string;
  /** The paths the deploy hook stages, and where (see infra/hooks/stage-package.mjs). */
  stagedPaths: readonly string[];
  stageDir: string;
  /** Whether a file exists, by path from the repository root. */
  exists(path: string): boolean;
  /**
   * Every app setting Baton reads (`BATON_*`), with the default its main.bicep parameter must
   * have, as the compiled template writes it (`'baton'`, `15`, `true`); `''` for a setting whose
   * default is "unset".
   */
  batonSettings: Readonly<Record<string, string | number | boolean>>;
}

export const MAIN_BICEP = 'infra/main.bicep';
/** Where a rule over the whole template reports. */
const ALL_BICEP = 'infra/**/*.bicep';

/** Role definition ids (built-in roles are the same GUID in every tenant). */
export const ROLE = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe',
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb',
  storageBlobDataReader: '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1',
  storageQueueDataMessageSender: 'c6a89b2d-59bc-44d0-9896-0f6e12d7b80a',
} as const;

/**
 * What the deployer (a principal main.bicep is given) may get, each on one container or queue of
 * the hub, never the account: the reader role on the hub container and the lease container, and
 * to steer, the custom request writer on the hub container and Message Sender on the wake queue.
 * Storage Blob Data Contributor is not among them: its container delete and write actions are
 * beyond any condition, and the account also holds the app's package.
 */
const DEPLOYER_READ_ROLE = ROLE.storageBlobDataReader;
const DEPLOYER_WAKE_ROLE = ROLE.storageQueueDataMessageSender;
/** The main.bicep parameter that lets the deployer steer (trigger and cancel) too. */
const DEPLOYER_STEER_PARAM = 'deployerCanSteer';

const CONTAINER_TYPE = 'Microsoft.Storage/storageAccounts/blobServices/containers';
const QUEUE_TYPE = 'Microsoft.Storage/storageAccounts/queueServices/queues';
const ROLE_DEFINITION_TYPE = 'Microsoft.Authorization/roleDefinitions';
const BLOB_WRITE = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write';
/** The principal types a deployer may be. */
const DEPLOYER_PRINCIPAL_TYPES = ['User', 'Group', 'ServicePrincipal'];

/** Roles that reach far beyond data access (or hand out keys): never assigned by these templates. */
export const FORBIDDEN_ROLES: Record<string, string> = {
  '8e3af657-a8ff-443c-a75c-2fe8c4bcb635': 'Owner',
  'b24988ac-6180-42a0-ab88-20f7382dd24c': 'Contributor',
  '18d7d88d-d35e-4fb5-a5c3-7773c20a72d9': 'User Access Administrator',
  '17d1049b-9a84-46fb-8f53-869881c3d3ab': 'Storage Account Contributor',
};

/** Role names for messages. */
const ROLE_NAMES: Record<string, string> = {
  [ROLE.storageBlobDataOwner]: 'Storage Blob Data Owner',
  [ROLE.storageBlobDataContributor]: 'Storage Blob Data Contributor',
  [ROLE.storageQueueDataContributor]: 'Storage Queue Data Contributor',
  [ROLE.storageTableDataContributor]: 'Storage Table Data Contributor',
  [ROLE.monitoringMetricsPublisher]: 'Monitoring Metrics Publisher',
  [ROLE.storageBlobDataReader]: 'Storage Blob Data Reader',
  [ROLE.storageQueueDataMessageSender]: 'Storage Queue Data Message Sender',
  ...FORBIDDEN_ROLES,
};

/** Resource types a role assignment may be scoped to: the storage account (or below it) and Application Insights. */
const ROLE_SCOPE_TYPES = ['Microsoft.Storage/storageAccounts', 'Microsoft.Insights/components'];

/**
 * Who a role assignment is for, as far as the template says: the app's own identity (an output
 * of the module that creates the user-assigned identity), a principal main.bicep is given as a
 * parameter, or anyone else.
 */
export type Principal = 'app-identity' | 'parameter' | 'other';

/**
 * The principalTypes each kind of principal's assignments may name. The app's identity is a
 * service principal; a principal main.bicep is given (the deployer) is whatever the deployer
 * says, from a parameter limited to these types.
 */
const PRINCIPAL_TYPES: Record<Principal, readonly string[]> = {
  'app-identity': ['ServicePrincipal'],
  parameter: DEPLOYER_PRINCIPAL_TYPES,
  other: ['ServicePrincipal'],
};

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

/**
 * Settings that belong to a feature the deployer switches on, by the setting whose parameter is
 * the switch: written exactly when it is true. The sample job's container is named only when the
 * sample is deployed.
 */
const CONDITIONAL_SETTINGS: Record<string, string> = { BATON_AUDIT_CONTAINER: 'BATON_SAMPLE_JOB' };

/** Host.json override of the functions' log level, set only when BATON_LOG_LEVEL is debug. */
const FUNCTION_LOG_LEVEL_OVERRIDE = 'AzureFunctionsJobHost__logging__logLevel__Function';
/** Host.json override of the queue trigger's deliveries, which must follow BATON_MAX_ATTEMPTS. */
const MAX_DEQUEUE_OVERRIDE = 'AzureFunctionsJobHost__extensions__queues__maxDequeueCount';

/** Key material in any string: a connection string, an account key, a SAS. */
const KEY_MATERIAL: readonly (readonly [RegExp, string])[] = [
  [/AccountKey\s*=/i, 'AccountKey='],
  [/SharedAccessSignature/i, 'SharedAccessSignature'],
  [/(^|[?&;\s'"])sig=/im, 'a SAS signature (sig=)'],
  [/DefaultEndpointsProtocol\s*=/i, 'a storage connection string'],
];

const GUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

export const AZURE_YAML_SCHEMA_LINE =
  '# yaml-language-server: $schema=https://raw.githubusercontent.com/Azure/azure-dev/main/schemas/v1.0/azure.yaml.json';

/** The rule id a problem line starts with. */
export function ruleOf(problem: string): string {
  return problem.slice(0, problem.indexOf(':'));
}

// --- reading --------------------------------------------------------------------------------

/**
 * The deployment files, infra/ compiled with the real Bicep CLI (one run for every file: each
 * module's own build gives its templateHash). Fails when the compiler does.
 */
export async function readInfraFiles(root: string): Promise<InfraFiles> {
  const infra = join(root, 'infra');
  const bicep: Record<string, string> = {};
  const walkDir = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walkDir(path);
      else if (entry.name.endsWith('.bicep')) bicep[relative(root, path).split(sep).join('/')] = readFileSync(path, 'utf8');
    }
  };
  walkDir(infra);
  const built = await bicepBuildAll(infra);
  const main = built.templates['main.bicep'];
  if (built.exitCode !== 0 || main === undefined) {
    throw new Error(`bicep build failed:\n${describeDiagnostics(built.diagnostics, infra)}`);
  }
  const hashes: Record<string, string> = {};
  for (const [path, json] of Object.entries(built.templates)) {
    const hash = (JSON.parse(json) as ArmTemplateJson).metadata?._generator?.templateHash;
    if (hash !== undefined) hashes[`infra/${path}`] = hash;
  }
  return {
    template: JSON.parse(main) as ArmTemplateJson,
    hashes,
    bicep,
    parametersJson: readFileSync(join(infra, 'main.parameters.json'), 'utf8'),
    azureYaml: readFileSync(join(root, 'azure.yaml'), 'utf8'),
    hostJson: readFileSync(join(root, 'functions', 'host.json'), 'utf8'),
  };
}

export function modelOf(files: Pick<InfraFiles, 'template' | 'hashes'>): ArmModel {
  return loadTemplate(files.template, files.hashes);
}

// --- reading the model ----------------------------------------------------------------------

/** A scope's own template as one tree, the templates of its modules left out (they are scopes of their own). */
function ownTree(scope: Scope): Expr {
  const { resources: _resources, ...rest } = scope.template;
  const resources = scope.resources.map((r) =>
    r.type === DEPLOYMENTS ? { ...r.json, properties: { ...r.json.properties, template: null } } : r.json,
  );
  return fromJson({ ...rest, resources });
}

/** The last segment of a child resource's name (`format('{0}/{1}', parameters('name'), 'ftp')` → ftp). */
function lastSegment(name: Expr): string | undefined {
  if (isCall(name, 'format')) {
    const pattern = literal(name.args[0]) ?? '';
    const last = pattern.split('/').pop() ?? '';
    const hole = /^\{(\d+)\}$/.exec(last);
    return hole ? literal(name.args[Number(hole[1]) + 1]) : last;
  }
  return literal(name)?.split('/').pop();
}

/** The value of `key` among entries, when exactly one entry sets it. */
function only(entries: readonly Entry[], key: string): Entry | undefined {
  const found = entries.filter((e) => e.key === key);
  return found.length === 1 ? found[0] : undefined;
}

/** The entries of an object-valued field of a resource, as main.bicep writes them. */
function entriesAt(resource: ArmResource, path: string): Entry[] {
  const value = field(resource, path);
  return value === undefined ? [] : entriesOf(toRoot(resource.scope, value)).entries;
}

/** What `expr` (as main.bicep writes it) becomes with `string()` dropped: `string(x)` is still x's value. */
const unstring = (expr: Expr | undefined): Expr | undefined => (isCall(expr, 'string') ? expr.args[0] : expr);

/** The role a role assignment grants: the GUID its roleDefinitionId names. */
function roleOf(assignment: ArmResource): string | undefined {
  const id = field(assignment, 'properties.roleDefinitionId');
  if (id === undefined) return undefined;
  const guids = stringsIn(toRoot(assignment.scope, id)).flatMap((s) => s.match(GUID) ?? []);
  return guids.length === 1 ? (guids[0] as string).toLowerCase() : undefined;
}

/** The custom role a role assignment grants: a role definition its own template creates, named by its roleDefinitionId. */
function customRoleOf(assignment: ArmResource): ArmResource | undefined {
  const id = field(assignment, 'properties.roleDefinitionId');
  if (!(isCall(id, 'resourceId') || isCall(id, 'subscriptionResourceId'))) return undefined;
  const definitions = assignment.scope.resources.filter((r) => r.type === ROLE_DEFINITION_TYPE && !r.existing);
  // resourceId('symbol') in languageVersion 2.0; resourceId(type, name) otherwise.
  if (id.args.length === 1) return definitions.find((r) => r.symbol !== undefined && r.symbol === literal(id.args[0]));
  if (id.args.length !== 2 || literal(id.args[0]) !== ROLE_DEFINITION_TYPE) return undefined;
  return definitions.find((r) => sameExpr(r.name, id.args[1] as Expr));
}

/** The list of strings a field holds, when it is a literal list of literals; undefined otherwise. */
function literalList(resource: ArmResource, path: string): string[] | undefined {
  const value = rawField(resource, path);
  if (value === undefined) return [];
  return Array.isArray(value) && value.every((v) => typeof v === 'string' && !v.startsWith('['))
    ? (value as string[])
    : undefined;
}

/**
 * What a role assignment's scope is, as main.bicep writes it: its resource type and, for one of
 * the account's containers or queues, that container's or queue's name (the last argument of
 * its resourceId).
 */
function scopeTarget(assignment: ArmResource): { type: string | undefined; name: Expr | undefined } {
  const scope = field(assignment, 'scope');
  const type = typeOfId(assignment.scope, scope);
  const rooted = scope && toRoot(assignment.scope, scope);
  const id = isCall(rooted, 'toLower') ? rooted.args[0] : rooted;
  const name =
    isCall(id, 'resourceId') && (type === CONTAINER_TYPE || type === QUEUE_TYPE) ? id.args[id.args.length - 1] : undefined;
  return { type, name };
}

/** Whether `name` (as main.bicep writes it) is the hub's name with `suffix`: `format('{0}<suffix>', parameters(<hub>))`. */
function isHubNamed(name: Expr | undefined, hubParam: string | undefined, suffix: string): boolean {
  return isCall(name, 'format') && literal(name.args[0]) === `{0}${suffix}` && rootParameter(name.args[1]) === hubParam;
}

/** Whether any of a resource's conditions reads main.bicep's parameter `param`. */
function conditionedOn(resource: ArmResource, param: string): boolean {
  return conditionsOf(resource).some((condition) => [...walk(condition)].some((node) => rootParameter(node) === param));
}

/**
 * Whether an ABAC condition (conditionVersion 2.0) allows `action` only on blobs whose path
 * starts with `prefix`, and limits nothing else: `!(ActionMatches{action}) OR path StringStartsWith
 * prefix`, in any spacing and parentheses. Says what it limits instead, or undefined when it is so.
 */
function pathConditionProblem(condition: string, action: string, prefix: string): string | undefined {
  const flat = condition.replace(/\s+/g, '');
  const opens = [...flat].filter((c) => c === '(').length;
  const closes = [...flat].filter((c) => c === ')').length;
  const shape =
    /^\(*!\(ActionMatches\{'([^']*)'\}\)\)*OR\(*@Resource\[Microsoft\.Storage\/storageAccounts\/blobServices\/containers\/blobs:path\]StringStartsWith'([^']*)'\)*$/.exec(
      flat,
    );
  if (!shape || opens !== closes) return `is not one ActionMatches and one blob path StringStartsWith`;
  if (shape[1] !== action) return `limits ${shape[1]}, not ${action}`;
  if (shape[2] !== prefix) return `limits writes to '${shape[2]}', not '${prefix}'`;
  return undefined;
}

/**
 * Which property of the app's identity `expr` (as main.bicep writes it) is: an output of the
 * module that creates the user-assigned identity, whose value is that identity's principalId,
 * clientId or id. Undefined for anything else.
 */
export function identityPropertyOf(model: ArmModel, expr: Expr): 'principalId' | 'clientId' | 'id' | undefined {
  // format('{0}', x), as an interpolated object key compiles, is x.
  if (isCall(expr, 'format') && literal(expr.args[0]) === '{0}' && expr.args.length === 2) {
    return identityPropertyOf(model, expr.args[1] as Expr);
  }
  const output = moduleOutput(model, expr);
  const module = output && scopeOf(model, output.deployment);
  if (!output || !module) return undefined;
  const identities = module.resources.filter((r) => r.type === 'Microsoft.ManagedIdentity/userAssignedIdentities' && !r.existing);
  const value = fromJson(module.template.outputs?.[output.output]?.value);
  if (typeOfId(module, value) === 'Microsoft.ManagedIdentity/userAssignedIdentities' && identities.length > 0) return 'id';
  if (value.kind !== 'property' || (value.name !== 'principalId' && value.name !== 'clientId')) return undefined;
  const target = value.target;
  const isIdentity =
    isCall(target, 'reference') &&
    identities.some((r) => r.symbol === literal(target.args[0]) || typeOfId(module, target.args[0]) === r.type);
  return isIdentity ? value.name : undefined;
}

/** Who a role assignment is for (see Principal). */
export function principalOf(model: ArmModel, assignment: ArmResource): Principal {
  const id = field(assignment, 'properties.principalId');
  const principal = id && toRoot(assignment.scope, id);
  if (!principal) return 'other';
  if (rootParameter(principal) !== undefined) return 'parameter';
  return identityPropertyOf(model, principal) === 'principalId' ? 'app-identity' : 'other';
}

/** Every app setting the template writes, wherever it is written, as main.bicep writes it. */
export function appSettingsOf(model: ArmModel): { file: string; entries: Entry[]; opaque: Expr[] } {
  const entries: Entry[] = [];
  const opaque: Expr[] = [];
  let file = ALL_BICEP;
  for (const resource of model.resources.filter((r) => !r.existing)) {
    if (resource.type === 'Microsoft.Web/sites/config' && lastSegment(resource.name) === 'appsettings') {
      const value = field(resource, 'properties');
      if (value === undefined) continue;
      const read = entriesOf(toRoot(resource.scope, value), conditionsOf(resource));
      entries.push(...read.entries);
      opaque.push(...read.opaque);
      file = resource.scope.file;
    }
    // The other form: a list of { name, value } in the site's siteConfig, or in its 'web' config.
    const inWebConfig = resource.type === 'Microsoft.Web/sites/config' && lastSegment(resource.name) === 'web';
    if (resource.type === 'Microsoft.Web/sites' || inWebConfig) {
      const list = field(resource, inWebConfig ? 'properties.appSettings' : 'properties.siteConfig.appSettings');
      for (const item of list === undefined ? [] : itemsOf(toRoot(resource.scope, list))) {
        const pairs = entriesOf(item).entries;
        const name = pairs.find((e) => e.key === 'name')?.value;
        const value = pairs.find((e) => e.key === 'value')?.value;
        if (name && value) entries.push({ key: literal(name), keyExpr: name, value, when: conditionsOf(resource) });
      }
    }
  }
  return { file, entries, opaque };
}

/** An ISO 8601 duration of minutes or hours (`PT5M`, `PT1H`), in minutes; NaN otherwise. */
function minutesOf(duration: unknown): number {
  const m = /^PT(?:(\d+)H)?(?:(\d+)M)?$/.exec(typeof duration === 'string' ? duration : '');
  if (!m || (m[1] === undefined && m[2] === undefined)) return Number.NaN;
  return Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0);
}

// --- the Bicep sources, as text ----------------------------------------------------------------

/**
 * The rules the compiled template cannot hold: comments do not reach it, and a key or a strong
 * role's id pasted into a comment is still a key in the repository.
 */
export function lintBicepSources(files: Record<string, string>): string[] {
  const problems: string[] = [];
  const report = (rule: string, file: string, message: string) => problems.push(`${rule}: ${file}: ${message}`);
  for (const [path, raw] of Object.entries(files)) {
    if (/\blist(Keys|AccountSas|ServiceSas)\s*\(/i.test(raw))
      report('no-list-keys', path, 'mentions listKeys/listAccountSas/listServiceSas');
    for (const [pattern, what] of KEY_MATERIAL) {
      if (pattern.test(raw)) report('no-key-material', path, `contains ${what}`);
    }
    for (const [id, name] of Object.entries(FORBIDDEN_ROLES)) {
      if (raw.toLowerCase().includes(id)) report('role-forbidden', path, `mentions the ${name} role (${id})`);
    }
  }
  return problems;
}

// --- the compiled template --------------------------------------------------------------------

export function lintTemplate(files: Pick<InfraFiles, 'template' | 'hashes'>, expect: InfraExpectations): string[] {
  const problems: string[] = [];
  const report = (rule: string, file: string, message: string) => problems.push(`${rule}: ${file}: ${message}`);
  const model = modelOf(files);
  const main = model.root;
  const live = model.resources.filter((r) => !r.existing);
  const ofType = (type: string) => live.filter((r) => r.type === type);
  // A role assignment in a resources array has no symbol, and its name is a guid(): say which role it grants.
  const what = (r: ArmResource): string => {
    if (r.symbol !== undefined) return r.label;
    if (r.type === ROLE_DEFINITION_TYPE)
      return `the custom role ${show(field(r, 'properties.roleName') ?? str('(no roleName)'))}`;
    if (r.type !== 'Microsoft.Authorization/roleAssignments') return r.label;
    const custom = customRoleOf(r);
    if (custom) return `${what(custom)} assignment`;
    return `the ${ROLE_NAMES[roleOf(r) ?? ''] ?? roleOf(r) ?? 'unknown role'} assignment`;
  };

  // Key material, anywhere in the template: no list*() call (each returns keys or secrets), no key in any string.
  for (const scope of model.scopes) {
    const tree = ownTree(scope);
    for (const node of walk(tree)) {
      if (node.kind === 'call' && /^list/i.test(node.name)) report('no-list-keys', scope.file, `calls ${node.name}()`);
    }
    const strings = stringsIn(tree);
    for (const [pattern, found] of KEY_MATERIAL) {
      if (strings.some((s) => pattern.test(s))) report('no-key-material', scope.file, `contains ${found}`);
    }
    // Nothing may answer without a key: no anonymous function, no anonymous access through App Service authentication.
    if (strings.some((s) => s.toLowerCase() === 'anonymous' || /\bAllowAnonymous\b/i.test(s))) {
      report('no-anonymous', scope.file, 'allows anonymous access');
    }
    for (const [id, name] of Object.entries(FORBIDDEN_ROLES)) {
      if (strings.some((s) => s.toLowerCase().includes(id)))
        report('role-forbidden', scope.file, `names the ${name} role (${id})`);
    }
  }

  // Scope and modules: every Bicep file is deployed; at subscription scope each module names its group.
  const schema = main.template.$schema ?? '';
  const atSubscription = /\/subscriptionDeploymentTemplate\.json#$/.test(schema);
  if (!atSubscription && !/\/deploymentTemplate\.json#$/.test(schema)) {
    report('target-scope', main.file, `the template's schema is ${schema}; use targetScope subscription or resourceGroup`);
  }
  for (const path of Object.keys(files.hashes)) {
    if (path !== main.file && !model.scopes.some((s) => s.file === path)) report('modules', path, 'no module deploys it');
  }
  // A module of a subscription-scope template without a resource group deploys at subscription scope.
  for (const scope of model.scopes) {
    if (!/\/subscriptionDeploymentTemplate\.json#$/.test(scope.template.$schema ?? '')) continue;
    for (const module of scope.resources.filter((r) => r.type === DEPLOYMENTS && r.json.resourceGroup === undefined)) {
      report(
        'target-scope',
        scope.file,
        `module ${module.label} has no resource group, so it would deploy at subscription scope`,
      );
    }
  }

  // Storage account.
  const accounts = ofType('Microsoft.Storage/storageAccounts');
  if (accounts.length === 0) report('storage-account', ALL_BICEP, 'no storage account is created');
  for (const account of accounts) {
    const is = (path: string, value: unknown) => rawField(account, `properties.${path}`) === value;
    const file = account.scope.file;
    if (!is('allowSharedKeyAccess', false))
      report('storage-shared-key', file, `${what(account)}: allowSharedKeyAccess must be false`);
    if (!is('minimumTlsVersion', 'TLS1_2')) report('storage-tls', file, `${what(account)}: minimumTlsVersion must be 'TLS1_2'`);
    if (!is('allowBlobPublicAccess', false))
      report('storage-public-blob', file, `${what(account)}: allowBlobPublicAccess must be false`);
    if (!is('supportsHttpsTrafficOnly', true))
      report('storage-https-only', file, `${what(account)}: supportsHttpsTrafficOnly must be true`);
    if (!is('defaultToOAuthAuthentication', true)) {
      report('storage-oauth-default', file, `${what(account)}: defaultToOAuthAuthentication must be true`);
    }
  }
  for (const container of model.resources.filter((r) => r.type === 'Microsoft.Storage/storageAccounts/blobServices/containers')) {
    const access = rawField(container, 'properties.publicAccess');
    if (access !== undefined && access !== 'None')
      report('container-public-access', container.scope.file, `${what(container)}: publicAccess is ${JSON.stringify(access)}`);
  }
  // The modules that create a storage account create the hub's containers and queues with it; a
  // name elsewhere (a role's scope) creates nothing.
  const storageModules = main.resources.filter(
    (r) =>
      r.type === DEPLOYMENTS &&
      (scopeOf(model, r)?.resources ?? []).some((x) => x.type === 'Microsoft.Storage/storageAccounts' && !x.existing),
  );
  const createdNodes = storageModules.flatMap((module) => [...walk(fromJson(module.json.properties?.parameters ?? {}))]);
  for (const suffix of expect.hubSuffixes) {
    const named = createdNodes.some(
      (node) => isCall(node, 'format') && literal(node.args[0]) === `{0}${suffix}` && rootParameter(node.args[1]) === 'hubName',
    );
    if (!named) report('hub-resources', main.file, `the storage module creates nothing named '\${hubName}${suffix}'`);
  }
  for (const [name, value] of [
    ['leaseContainerName', expect.leaseContainer],
    ['auditContainerName', expect.auditContainer],
  ] as const) {
    // A parameter (BATON_LEASE_CONTAINER, BATON_AUDIT_CONTAINER) whose default is Baton's.
    const declared = main.template.parameters?.[name]?.defaultValue ?? main.template.variables?.[name];
    if (declared !== value) report('hub-resources', main.file, `${name} must be '${value}', Baton's default`);
  }

  // The sample job's container is created when the sample is asked for, and only then: every
  // mention of its parameter sits in the true branch of the sample switch.
  const sampleSwitch = parameterDocumentedAs(main, 'BATON_SAMPLE_JOB');
  let auditMentions = 0;
  const outsideSample = (expr: Expr, inside: boolean): boolean => {
    if (rootParameter(expr) === 'auditContainerName') {
      auditMentions += 1;
      return !inside;
    }
    if (isCall(expr, 'if') && sampleSwitch !== undefined && rootParameter(expr.args[0]) === sampleSwitch) {
      const [, yes, no] = expr.args as [Expr, Expr, Expr];
      return outsideSample(yes, true) || outsideSample(no, false);
    }
    const children: Expr[] =
      expr.kind === 'call'
        ? expr.args
        : expr.kind === 'array'
          ? expr.items
          : expr.kind === 'object'
            ? expr.entries.flatMap((e) => [e.key, e.value])
            : expr.kind === 'property'
              ? [expr.target]
              : expr.kind === 'index'
                ? [expr.target, expr.index]
                : [];
    return children.map((child) => outsideSample(child, inside)).some(Boolean);
  };
  for (const module of storageModules) {
    if (outsideSample(fromJson(module.json.properties?.parameters ?? {}), false)) {
      report(
        'sample-only-when-asked',
        main.file,
        `${what(module)} creates the sample's container (auditContainerName) even when BATON_SAMPLE_JOB is off`,
      );
    }
  }
  if (sampleSwitch === undefined || auditMentions === 0) {
    report(
      'sample-only-when-asked',
      main.file,
      "the sample's container is never created, even when BATON_SAMPLE_JOB asks for it",
    );
  }

  // Roles: which, to whom, and where.
  const assignments = ofType('Microsoft.Authorization/roleAssignments');
  const granted = (roles: readonly string[], to: Principal) =>
    assignments.filter((a) => roles.includes(roleOf(a) ?? '') && principalOf(model, a) === to);
  if (granted([ROLE.storageBlobDataOwner, ROLE.storageBlobDataContributor], 'app-identity').length === 0) {
    report('role-blob-data', ALL_BICEP, "the app's identity gets no Storage Blob Data Owner or Contributor role");
  }
  if (granted([ROLE.storageQueueDataContributor], 'app-identity').length === 0)
    report('role-queue-data', ALL_BICEP, "the app's identity gets no Storage Queue Data Contributor role");
  if (granted([ROLE.monitoringMetricsPublisher], 'app-identity').length === 0)
    report('app-insights-entra', ALL_BICEP, "the app's identity gets no Monitoring Metrics Publisher role");
  for (const assignment of assignments) {
    const file = assignment.scope.file;
    const role = roleOf(assignment);
    if (role === undefined && customRoleOf(assignment) === undefined) {
      report('role-forbidden', file, `${what(assignment)}: its roleDefinitionId names no one role, so it may be any`);
    } else if (role !== undefined && role in FORBIDDEN_ROLES) {
      report('role-forbidden', file, `${what(assignment)} assigns ${FORBIDDEN_ROLES[role]}`);
    }
    const scope = field(assignment, 'scope');
    if (scope === undefined) {
      report('role-scope', file, `${what(assignment)} has no scope, so it applies to the whole group or subscription`);
    } else {
      const type = typeOfId(assignment.scope, scope);
      const allowed = type !== undefined && ROLE_SCOPE_TYPES.some((t) => type === t || type.startsWith(`${t}/`));
      if (!allowed) {
        report(
          'role-scope',
          file,
          `${what(assignment)} is scoped to ${show(scope)}, which is not the storage account or Application Insights`,
        );
      }
    }
    const principal = principalOf(model, assignment);
    const types = PRINCIPAL_TYPES[principal];
    const typeExpr = field(assignment, 'properties.principalType');
    const rooted = typeExpr && toRoot(assignment.scope, typeExpr);
    const typeParam = rootParameter(rooted);
    const allowed = typeParam === undefined ? undefined : main.template.parameters?.[typeParam]?.allowedValues;
    const typeOk =
      literal(rooted) !== undefined
        ? types.includes(literal(rooted) as string)
        : principal === 'parameter' &&
          Array.isArray(allowed) &&
          allowed.length > 0 &&
          allowed.every((value) => typeof value === 'string' && types.includes(value));
    if (!typeOk) {
      const must = types.length === 1 ? `'${types[0]}'` : `one of ${types.join(', ')} (or a parameter allowing only those)`;
      report('role-principal-type', file, `${what(assignment)}: principalType must be ${must}`);
    }
    if (principal === 'parameter') {
      // None when no deployer is named.
      const principalParam = rootParameter(toRoot(assignment.scope, field(assignment, 'properties.principalId') as Expr));
      const unlessEmpty = conditionsOf(assignment).some((condition) =>
        [...walk(condition)].some((node) => isCall(node, 'empty') && rootParameter(node.args[0]) === principalParam),
      );
      if (!unlessEmpty)
        report('role-deployer', file, `${what(assignment)} is made even when ${principalParam ?? 'the principal'} is empty`);
    }
    if (!isCall(assignment.name, 'guid')) report('role-name-guid', file, `${what(assignment)}: name must be guid(...)`);
  }

  // The deployer's roles, each on the one container or queue the baton CLI uses and never on the
  // account, which also holds the app's package (whoever replaces it runs code as the app) and
  // the results queue (whoever writes there forges results).
  const hubParam = parameterDocumentedAs(main, 'BATON_HUB');
  const leaseParam = parameterDocumentedAs(main, 'BATON_LEASE_CONTAINER');
  const deployerReads = { hub: 0, lease: 0 };
  let deployerWakes = 0;
  let deployerWrites = 0;
  for (const assignment of assignments.filter((a) => principalOf(model, a) === 'parameter')) {
    const file = assignment.scope.file;
    const role = roleOf(assignment);
    const custom = customRoleOf(assignment);
    const { type, name } = scopeTarget(assignment);
    const onHub = type === CONTAINER_TYPE && isHubNamed(name, hubParam, expect.hubContainerSuffix);
    const onLease = type === CONTAINER_TYPE && leaseParam !== undefined && rootParameter(name) === leaseParam;
    const steers = conditionedOn(assignment, DEPLOYER_STEER_PARAM);
    if (role === DEPLOYER_READ_ROLE && !custom) {
      if (!onHub && !onLease) {
        report(
          'role-deployer',
          file,
          `${what(assignment)} must be on the hub container ('\${hubName}${expect.hubContainerSuffix}') or the lease container, not ${show(field(assignment, 'scope') ?? str('its group'))}`,
        );
      }
      if (onHub) deployerReads.hub += 1;
      if (onLease) deployerReads.lease += 1;
      if (steers) {
        report('role-deployer', file, `${what(assignment)} must not depend on ${DEPLOYER_STEER_PARAM}: steering adds to reading`);
      }
    } else if (role === DEPLOYER_WAKE_ROLE && !custom) {
      deployerWakes += 1;
      if (type !== QUEUE_TYPE || !isHubNamed(name, hubParam, expect.wakeQueueSuffix)) {
        report(
          'role-deployer',
          file,
          `${what(assignment)} must be on shard 0's work queue ('\${hubName}${expect.wakeQueueSuffix}') alone, not ${show(field(assignment, 'scope') ?? str('its group'))}`,
        );
      }
      if (!steers) report('role-deployer', file, `${what(assignment)} is made even when ${DEPLOYER_STEER_PARAM} is false`);
    } else if (custom) {
      deployerWrites += 1;
      if (!onHub) {
        report(
          'role-deployer',
          file,
          `${what(assignment)} must be on the hub container ('\${hubName}${expect.hubContainerSuffix}') alone, not ${show(field(assignment, 'scope') ?? str('its group'))}`,
        );
      }
      if (!steers) report('role-deployer', file, `${what(assignment)} is made even when ${DEPLOYER_STEER_PARAM} is false`);
      const condition = field(assignment, 'properties.condition');
      const text = condition && textOf(toRoot(assignment.scope, condition));
      const wrong =
        text === undefined
          ? 'has no condition it can be read from, so it writes anywhere in the container'
          : pathConditionProblem(text, BLOB_WRITE, expect.requestPrefix);
      if (wrong !== undefined || rawField(assignment, 'properties.conditionVersion') !== '2.0') {
        report(
          'role-deployer',
          file,
          `${what(assignment)}: its condition (version 2.0) must allow ${BLOB_WRITE} only under '${expect.requestPrefix}'; it ${wrong ?? 'has another conditionVersion'}`,
        );
      }
    } else {
      report(
        'role-deployer',
        file,
        `${what(assignment)}: the deployer may get only Storage Blob Data Reader, and to steer the request writer and Storage Queue Data Message Sender`,
      );
    }
  }
  for (const [where, count] of Object.entries(deployerReads)) {
    if (count !== 1) {
      report(
        'role-deployer',
        ALL_BICEP,
        `the deployer must get Storage Blob Data Reader on the ${where} container once, found ${count}`,
      );
    }
  }
  if (deployerWakes !== 1)
    report('role-deployer', ALL_BICEP, `the deployer must get Storage Queue Data Message Sender once, found ${deployerWakes}`);
  if (deployerWrites !== 1)
    report('role-deployer', ALL_BICEP, `the deployer must get the request writer once, found ${deployerWrites}`);

  // The request writer, the only custom role: created only for a deployer who steers, assignable
  // only in the account's group, named for its account and hub (a role name is unique in the
  // tenant), and able to write blobs and create the container, nothing else.
  for (const definition of ofType(ROLE_DEFINITION_TYPE)) {
    const file = definition.scope.file;
    const bad = (message: string) => report('role-deployer', file, `${what(definition)}: ${message}`);
    if (!conditionedOn(definition, DEPLOYER_STEER_PARAM)) bad(`is created even when ${DEPLOYER_STEER_PARAM} is false`);
    const scopes = field(definition, 'properties.assignableScopes');
    const scopeItems = scopes ? itemsOf(toRoot(definition.scope, scopes)) : [];
    const isGroup = (e: Expr | undefined) => e?.kind === 'property' && e.name === 'id' && isCall(e.target, 'resourceGroup');
    if (scopeItems.length !== 1 || !isGroup(scopeItems[0]))
      bad("assignableScopes must be [resourceGroup().id], the account's group");
    const roleName = field(definition, 'properties.roleName');
    const named = roleName ? [...walk(toRoot(definition.scope, roleName))] : [];
    if (!named.some((node) => isHubNamed(node, hubParam, expect.hubContainerSuffix)) || literal(roleName) !== undefined) {
      bad('roleName must name the account and the hub container: a role name is unique in the tenant');
    }
    const permissions = rawField(definition, 'properties.permissions');
    if (!Array.isArray(permissions) || permissions.length !== 1) {
      bad('must have one permissions entry');
      continue;
    }
    const actions = literalList(definition, 'properties.permissions.0.actions');
    const dataActions = literalList(definition, 'properties.permissions.0.dataActions');
    // No control action: a container's delete or write is beyond any condition, and the CLI's
    // document store creates its container only when a write finds it missing.
    if (actions === undefined || actions.length > 0) bad('actions must be empty: no control action');
    if (dataActions === undefined || dataActions.length !== 1 || dataActions[0] !== BLOB_WRITE) {
      bad(`dataActions must be ${BLOB_WRITE} alone: no read, delete or other data action`);
    }
  }

  // Assignments on a container or queue need it to exist first: the module that makes them must
  // wait for every module that creates the account's containers and queues.
  for (const module of new Set(
    assignments
      .filter((a) => principalOf(model, a) === 'parameter')
      .flatMap((a) => (a.scope.deployment ? [a.scope.deployment] : [])),
  )) {
    const after = ((module.json.dependsOn ?? []) as unknown[]).map((d) => fromJson(d));
    for (const creator of storageModules.filter((m) => m !== module)) {
      const waits = after.some((d) =>
        isCall(d, 'extensionResourceId') || isCall(d, 'resourceId')
          ? sameExpr(d.args[d.args.length - 1] as Expr, creator.name)
          : literal(d) === creator.symbol,
      );
      if (!waits)
        report(
          'role-deployer',
          module.scope.file,
          `${what(module)} must depend on ${what(creator)}, which creates the containers and queues it assigns roles on`,
        );
    }
  }

  // Storage Table Data Contributor: granted exactly when BATON_ENGINE is durable.
  const engineParam = parameterDocumentedAs(main, 'BATON_ENGINE');
  const tableRoles = granted([ROLE.storageTableDataContributor], 'app-identity');
  if (tableRoles.length === 0) {
    report(
      'role-table-data',
      ALL_BICEP,
      'Storage Table Data Contributor is not assigned: the durable engine keeps its task hub in tables',
    );
  }
  const durable = engineParam && call('equals', call('parameters', str(engineParam)), str('durable'));
  for (const assignment of tableRoles) {
    const conditions = conditionsOf(assignment);
    if (!durable || conditions.length !== 1 || !sameExpr(conditions[0] as Expr, durable)) {
      report(
        'role-table-data',
        assignment.scope.file,
        `${what(assignment)} must be deployed if (and only if) BATON_ENGINE (${engineParam ?? 'no parameter'}) is 'durable'`,
      );
    }
  }

  // Identity.
  if (ofType('Microsoft.ManagedIdentity/userAssignedIdentities').length === 0) {
    report('identity', ALL_BICEP, 'no user-assigned identity is created');
  }

  // The function app.
  const plans = ofType('Microsoft.Web/serverfarms');
  const isFlex = (plan: ArmResource) => rawField(plan, 'sku.name') === 'FC1' && rawField(plan, 'sku.tier') === 'FlexConsumption';
  if (plans.length === 0 || !plans.every(isFlex))
    report('flex-plan', ALL_BICEP, "the plan must be sku FC1, tier 'FlexConsumption'");
  const sites = ofType('Microsoft.Web/sites');
  if (sites.length !== 1) report('flex-site', ALL_BICEP, `expected one function app, found ${sites.length}`);
  for (const site of sites) {
    const file = site.scope.file;
    const config = (path: string) => rawField(site, `properties.functionAppConfig.${path}`);
    if (rawField(site, 'kind') !== 'functionapp,linux' || rawField(site, 'properties.functionAppConfig') === undefined) {
      report('flex-site', file, `${what(site)}: kind must be 'functionapp,linux' with a functionAppConfig`);
    }
    if (config('runtime.name') !== 'node' || config('runtime.version') !== '22') {
      report('flex-runtime', file, `${what(site)}: runtime must be node 22`);
    }
    const maximum = field(site, 'properties.functionAppConfig.scaleAndConcurrency.maximumInstanceCount');
    if (
      rootParameter(maximum && toRoot(site.scope, maximum)) === undefined ||
      config('scaleAndConcurrency.instanceMemoryMB') !== 2048
    ) {
      report('flex-scale', file, `${what(site)}: maximumInstanceCount must come from a parameter and instanceMemoryMB be 2048`);
    }
    const reader = field(site, 'properties.functionAppConfig.deployment.storage.authentication.userAssignedIdentityResourceId');
    if (
      config('deployment.storage.authentication.type') !== 'UserAssignedIdentity' ||
      !reader ||
      identityPropertyOf(model, toRoot(site.scope, reader)) !== 'id'
    ) {
      report(
        'flex-deployment-identity',
        file,
        `${what(site)}: the deployment container must be read with the user-assigned identity`,
      );
    }
    if (rawField(site, 'properties.httpsOnly') !== true) report('https-only', file, `${what(site)}: httpsOnly must be true`);
    if (!['1.2', '1.3'].includes(String(rawField(site, 'properties.siteConfig.minTlsVersion')))) {
      report('site-tls', file, `${what(site)}: siteConfig.minTlsVersion must be '1.2' or later`);
    }
    const identities = Object.keys((rawField(site, 'identity.userAssignedIdentities') ?? {}) as Record<string, unknown>);
    if (
      rawField(site, 'identity.type') !== 'UserAssigned' ||
      identities.length !== 1 ||
      identityPropertyOf(model, toRoot(site.scope, fromJson(identities[0]))) !== 'id'
    ) {
      report('identity', file, `${what(site)}: identity type must be 'UserAssigned', with the app's identity alone`);
    }
    if (serviceTagIn(site) === undefined) report('tags', file, `${what(site)}: no literal azd-service-name tag`);
  }
  const policies = ofType('Microsoft.Web/sites/basicPublishingCredentialsPolicies');
  for (const method of ['ftp', 'scm']) {
    const policy = policies.find((p) => lastSegment(p.name) === method);
    if (!policy || rawField(policy, 'properties.allow') !== false) {
      report(
        'basic-auth',
        policy?.scope.file ?? ALL_BICEP,
        `basic publishing credentials for ${method} must be disabled (allow: false)`,
      );
    }
  }
  // Entra sign-in in front of the routes: exactly when BATON_HTTP_AUTH is entra, signing everyone
  // in with the deployer's app registration, with no secret and no token store (it needs a SAS).
  const httpAuth = parameterDocumentedAs(main, 'BATON_HTTP_AUTH');
  const signIns = ofType('Microsoft.Web/sites/config').filter((r) => lastSegment(r.name) === 'authsettingsV2');
  if (signIns.length !== 1)
    report('entra-sign-in', ALL_BICEP, `expected one authsettingsV2 (Entra sign-in), found ${signIns.length}`);
  for (const signIn of signIns) {
    const file = signIn.scope.file;
    const onlyWhenEntra =
      httpAuth !== undefined &&
      conditionsOf(signIn).length === 1 &&
      sameExpr(conditionsOf(signIn)[0] as Expr, call('equals', call('parameters', str(httpAuth)), str('entra')));
    if (!onlyWhenEntra) report('entra-sign-in', file, `${what(signIn)} must be deployed exactly when BATON_HTTP_AUTH is 'entra'`);
    const action = rawField(signIn, 'properties.globalValidation.unauthenticatedClientAction');
    if (
      rawField(signIn, 'properties.platform.enabled') !== true ||
      rawField(signIn, 'properties.globalValidation.requireAuthentication') !== true ||
      !['RedirectToLoginPage', 'Return401', 'Return403'].includes(action as string)
    ) {
      report('entra-sign-in', file, `${what(signIn)} must be enabled and require sign-in on every route`);
    }
    const aad = 'properties.identityProviders.azureActiveDirectory';
    const clientId = field(signIn, `${aad}.registration.clientId`);
    if (rawField(signIn, `${aad}.enabled`) !== true || rootParameter(clientId && toRoot(signIn.scope, clientId)) === undefined) {
      report('entra-sign-in', file, `${what(signIn)} must sign in with the app registration main.bicep is given`);
    }
    const issuer = field(signIn, `${aad}.registration.openIdIssuer`);
    const issuerNodes = issuer ? [...walk(toRoot(signIn.scope, issuer))] : [];
    if (!issuerNodes.some((node) => node.kind === 'property' && node.name === 'loginEndpoint')) {
      report('entra-sign-in', file, `${what(signIn)}: the issuer must come from environment().authentication.loginEndpoint`);
    }
    const secret = ['clientSecretSettingName', 'clientSecretCertificateThumbprint'].filter(
      (key) => rawField(signIn, `${aad}.registration.${key}`) !== undefined,
    );
    if (secret.length > 0 || rawField(signIn, 'properties.login.tokenStore.enabled') !== false) {
      report('entra-sign-in', file, `${what(signIn)} must keep no client secret and no token store`);
    }
  }

  // Every resource Azure keeps in a region carries the environment's tag, from main.bicep's environmentName.
  for (const resource of live.filter((r) => r.json.location !== undefined)) {
    const tag = only(entriesAt(resource, 'tags'), 'azd-env-name');
    if (rootParameter(tag?.value) !== 'environmentName')
      report('tags', resource.scope.file, `${what(resource)}: tags must carry 'azd-env-name': environmentName`);
  }

  // App settings.
  const settings = appSettingsOf(model);
  const keys = settings.entries.map((e) => e.key);
  for (const name of IDENTITY_SETTINGS) {
    if (!keys.includes(name)) report('app-settings-identity', settings.file, `${name} is not set`);
  }
  const clientId = only(settings.entries, 'AzureWebJobsStorage__clientId')?.value;
  if (clientId && identityPropertyOf(model, clientId) !== 'clientId') {
    report('app-settings-identity', settings.file, "AzureWebJobsStorage__clientId must be the app's identity's client id");
  }
  const credential = settings.entries.filter((e) => e.key === 'AzureWebJobsStorage__credential');
  if (credential.length === 0 || credential.some((e) => literal(e.value) !== 'managedidentity')) {
    report('app-settings-credential', settings.file, "AzureWebJobsStorage__credential must be 'managedidentity'");
  }
  // Outside Azure's public cloud the host cannot derive the endpoints from the name: there, and
  // only there, the URIs may be set.
  const outsidePublicCloud = call(
    'not',
    call('equals', { kind: 'property', target: call('environment'), name: 'name' }, str('AzureCloud')),
  );
  for (const entry of settings.entries) {
    const key = entry.key;
    const sovereign = entry.when.length === 1 && sameExpr(entry.when[0] as Expr, outsidePublicCloud);
    if (key !== undefined && /^AzureWebJobsStorage__\w*ServiceUri$/i.test(key) && !sovereign) {
      report(
        'app-settings-host-storage',
        settings.file,
        `${key} is set: the host's connection takes AzureWebJobsStorage__accountName alone`,
      );
    }
  }
  if (keys.some((key) => key?.toLowerCase() === 'azurewebjobsstorage')) {
    report('app-settings-plain-connection', settings.file, 'AzureWebJobsStorage is set as a connection string');
  }
  for (const name of FLEX_DEPRECATED_SETTINGS) {
    if (keys.includes(name)) report('app-settings-flex-deprecated', settings.file, `${name} is not used by Flex Consumption`);
  }
  for (const key of keys) {
    if (key !== undefined && key.startsWith('BATON_') && !(key in expect.batonSettings))
      report('app-settings-baton', settings.file, `${key} is set, but Baton reads no such setting`);
  }
  if (settings.entries.some((e) => e.key === undefined) || settings.opaque.length > 0) {
    report('app-settings-baton', settings.file, 'some app settings have names the template computes, which no rule can check');
  }
  if (!keys.includes('APPLICATIONINSIGHTS_CONNECTION_STRING')) {
    report('app-insights-entra', settings.file, 'APPLICATIONINSIGHTS_CONNECTION_STRING is not set');
  }
  const authValue = only(settings.entries, 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING')?.value;
  const authString = textOf(authValue);
  const hole = /(?:^|;)ClientId=\{(\d+)\}(?:;|$)/.exec(authString ?? '')?.[1];
  const authClient = hole === undefined || !isCall(authValue, 'format') ? undefined : authValue.args[Number(hole) + 1];
  if (
    authString === undefined ||
    !/(^|;)Authorization=AAD(;|$)/.test(authString) ||
    !authClient ||
    identityPropertyOf(model, authClient) !== 'clientId'
  ) {
    report(
      'app-insights-entra',
      settings.file,
      "APPLICATIONINSIGHTS_AUTHENTICATION_STRING must be 'ClientId=<the app's identity's client id>;Authorization=AAD'",
    );
  }
  const components = ofType('Microsoft.Insights/components');
  if (components.length === 0 || !components.every((c) => rawField(c, 'properties.DisableLocalAuth') === true)) {
    report('app-insights-entra', ALL_BICEP, 'Application Insights must set DisableLocalAuth: true');
  }
  if (keys.includes('APPINSIGHTS_INSTRUMENTATIONKEY')) {
    report('app-insights-entra', settings.file, 'APPINSIGHTS_INSTRUMENTATIONKEY is the legacy key setting');
  }

  // Outputs end up in .azure/<env>/.env and the deployment history.
  const secretish = /key|secret|connectionstring|password|\bsas\b|sig=/i;
  for (const scope of model.scopes) {
    for (const [name, output] of Object.entries(scope.template.outputs ?? {})) {
      const value = JSON.stringify(output.value ?? '');
      if (secretish.test(name) || secretish.test(value) || /^secure/i.test(output.type ?? '')) {
        report('outputs-secret', scope.file, `output ${name} looks like a credential: ${value}`);
      }
    }
  }

  // Parameters of main.bicep.
  const checkParam = (name: string, constraints: Record<string, number>, defaultValue: unknown) => {
    const p = main.template.parameters?.[name];
    if (!p) {
      report('params', main.file, `parameter ${name} is missing`);
      return;
    }
    for (const [key, value] of Object.entries(constraints)) {
      if (p[key] !== value) report('params', main.file, `${name} needs @${key}(${value})`);
    }
    if (!p.metadata?.description) report('params', main.file, `${name} needs a @description`);
    if (defaultValue !== undefined && p.defaultValue !== defaultValue) {
      report(
        'params',
        main.file,
        `${name} defaults to ${JSON.stringify(p.defaultValue) ?? 'nothing'}, expected ${JSON.stringify(defaultValue)}`,
      );
    }
  };
  checkParam('environmentName', {}, undefined);
  checkParam('location', {}, undefined);
  checkParam('hubName', { minLength: 1, maxLength: 51 }, expect.hub);
  checkParam('coordinatorSchedule', {}, expect.coordinatorSchedule);
  checkParam('leaseSeconds', { minValue: 15, maxValue: 60 }, expect.leaseSeconds);
  checkParam('maximumInstanceCount', { minValue: 1, maxValue: 1000 }, expect.maximumInstanceCount);

  return problems;
}

/** The main.bicep parameter whose description starts with `setting:`. */
function parameterDocumentedAs(main: Scope, setting: string): string | undefined {
  return Object.entries(main.template.parameters ?? {}).find(([, p]) => p.metadata?.description?.startsWith(`${setting}:`))?.[0];
}

/** The literal azd-service-name tag of a function app. */
function serviceTagIn(site: ArmResource): string | undefined {
  return literal(only(entriesAt(site, 'tags'), 'azd-service-name')?.value);
}

// --- Baton's settings, end to end ------------------------------------------------------------

/**
 * Every setting Baton reads can be set with `azd env set`, and survives `azd provision`: a
 * main.bicep parameter documented as the setting, with Baton's default, mapped from the azd
 * variable of the same name in main.parameters.json, and written to the app setting from that
 * parameter (through the modules between).
 */
export function lintBatonSettings(
  files: Pick<InfraFiles, 'template' | 'hashes' | 'parametersJson'>,
  expect: Pick<InfraExpectations, 'batonSettings'>,
): string[] {
  const problems: string[] = [];
  const report = (rule: string, file: string, message: string) => problems.push(`${rule}: ${file}: ${message}`);
  const model = modelOf(files);
  const main = model.root;
  let azd: Record<string, { value?: unknown }> = {};
  try {
    azd = (JSON.parse(files.parametersJson) as { parameters?: typeof azd }).parameters ?? {};
  } catch {
    // lintParameters reports it.
  }
  const settings = appSettingsOf(model);
  /**
   * The main.bicep parameter a setting is written from, when it is that parameter (or its
   * string()) and set unconditionally, or, for a setting that belongs to a feature, exactly when
   * the parameter of the feature's switch is true.
   */
  const sourceOf = (name: string): string | undefined => {
    const entry = only(settings.entries, name);
    const feature = CONDITIONAL_SETTINGS[name];
    const switchParam = feature === undefined ? undefined : parameterDocumentedAs(main, feature);
    const when = entry?.when ?? [];
    const conditionOk =
      feature === undefined
        ? when.length === 0
        : switchParam !== undefined && when.length === 1 && rootParameter(when[0]) === switchParam;
    return entry && conditionOk ? rootParameter(unstring(entry.value)) : undefined;
  };

  for (const [name, expectedDefault] of Object.entries(expect.batonSettings)) {
    const param = parameterDocumentedAs(main, name);
    const declared = param === undefined ? undefined : main.template.parameters?.[param];
    if (param === undefined || declared === undefined) {
      report('baton-settings-param', main.file, `no parameter is documented as ${name} (@description('${name}: ...'))`);
    } else {
      if (declared.defaultValue !== expectedDefault) {
        report(
          'baton-settings-param',
          main.file,
          `${param} (${name}) defaults to ${JSON.stringify(declared.defaultValue) ?? 'nothing'}, Baton's default is ${JSON.stringify(expectedDefault)}`,
        );
      }
      if (azd[param]?.value !== `\${${name}}`) {
        report(
          'baton-settings-azd',
          'infra/main.parameters.json',
          `${param} must be "\${${name}}", so azd env set ${name} reaches it`,
        );
      }
    }
    if (!settings.entries.some((e) => e.key === name)) {
      report('app-settings-baton', settings.file, `${name} is not set`);
      continue;
    }
    if (param === undefined || sourceOf(name) !== param) {
      report('baton-settings-wiring', settings.file, `${name} is not written from main.bicep's ${param ?? name} parameter`);
    }
  }

  // Settings written beside Baton's, from the same parameters.
  const attempts = sourceOf('BATON_MAX_ATTEMPTS');
  if (attempts === undefined || sourceOf(MAX_DEQUEUE_OVERRIDE) !== attempts) {
    report('app-settings-max-dequeue', settings.file, `${MAX_DEQUEUE_OVERRIDE} must follow BATON_MAX_ATTEMPTS`);
  }
  const logLevel = sourceOf('BATON_LOG_LEVEL');
  const overrides = settings.entries.filter((e) => e.key === FUNCTION_LOG_LEVEL_OVERRIDE);
  const debug = logLevel && call('equals', call('parameters', str(logLevel)), str('debug'));
  const override = overrides[0];
  if (
    !debug ||
    overrides.length !== 1 ||
    !override ||
    literal(override.value) !== 'Debug' ||
    override.when.length !== 1 ||
    !sameExpr(override.when[0] as Expr, debug)
  ) {
    report(
      'app-settings-debug-log',
      settings.file,
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
export function lintMonitoring(files: Pick<InfraFiles, 'template' | 'hashes'>): string[] {
  const problems: string[] = [];
  const report = (rule: string, file: string, message: string) => problems.push(`${rule}: ${file}: ${message}`);
  const model = modelOf(files);
  const live = model.resources.filter((r) => !r.existing);
  const isComponent = (scope: Scope, expr: Expr | undefined) => typeOfId(scope, expr) === 'Microsoft.Insights/components';

  interface Criterion {
    query?: unknown;
    timeAggregation?: unknown;
    metricMeasureColumn?: unknown;
    operator?: unknown;
    threshold?: unknown;
  }
  const criteriaOf = (rule: ArmResource) => {
    const all = rawField(rule, 'properties.criteria.allOf');
    return (Array.isArray(all) ? all : []) as Criterion[];
  };
  const queryOf = (rule: ArmResource, criterion: Criterion) => textOf(toRoot(rule.scope, fromJson(criterion.query ?? ''))) ?? '';
  const queries = (rule: ArmResource) => criteriaOf(rule).map((c) => queryOf(rule, c));

  const rules = live.filter((r) => r.type === 'Microsoft.Insights/scheduledQueryRules');
  if (rules.length !== 5) report('alerts', ALL_BICEP, `expected five scheduled query rules, found ${rules.length}`);
  const find = (signal: string) => rules.filter((rule) => queries(rule).some((q) => q.includes(`"${signal}"`)));
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
    const rule = found[0] as ArmResource;
    const file = rule.scope.file;
    const text = queries(rule).join('\n');
    for (const needed of [table, ...must]) {
      if (!text.includes(needed)) report('alerts-query', file, `${rule.label} (${what}): its query must read ${needed}`);
    }
    const scopes = rawField(rule, 'properties.scopes');
    if (!Array.isArray(scopes) || scopes.length !== 1 || !isComponent(rule.scope, fromJson(scopes[0]))) {
      report('alerts-scope', file, `${rule.label} (${what}) must be scoped to the Application Insights component alone`);
    }
    const frequency = minutesOf(rawField(rule, 'properties.evaluationFrequency'));
    const window = minutesOf(rawField(rule, 'properties.windowSize'));
    const ago = [...text.matchAll(/\bago\(([^)]*)\)/g)].map((m) => m[1]);
    if (!(frequency <= 5) || !(window >= frequency)) {
      report(
        'alerts-window',
        file,
        `${rule.label} (${what}) must be evaluated every 5 minutes or less over a window at least as long`,
      );
    }
    if (signal === 'baton.leader.transitions' && (window !== 5 || ago.length === 0 || ago.some((span) => span !== '5m'))) {
      report('alerts-window', file, `${rule.label} (${what}) must look at the last 5 minutes exactly (windowSize PT5M, ago(5m))`);
    }
    const criteria = criteriaOf(rule);
    const criterion = criteria[0] ?? {};
    if (criteria.length !== 1) report('alerts-condition', file, `${rule.label} (${what}) must have one criterion`);
    if (signal === 'baton.schedule.start_lag') {
      // The one alert on a level: the deployer says how late is too late.
      const fromParameter = rootParameter(toRoot(rule.scope, fromJson(criterion.threshold))) !== undefined;
      if (criterion.operator !== 'GreaterThan' || !fromParameter || criterion.timeAggregation !== 'Maximum') {
        report(
          'alerts-condition',
          file,
          `${rule.label} (${what}) must fire when the largest lag is above a threshold from a parameter (Maximum, GreaterThan)`,
        );
      }
    } else if (criterion.operator !== 'GreaterThan' || criterion.threshold !== 0) {
      report('alerts-condition', file, `${rule.label} (${what}) must fire when its query finds anything (GreaterThan 0)`);
    }
    if (signal === 'baton.fencing.refusals' && (criterion.timeAggregation !== 'Total' || !criterion.metricMeasureColumn)) {
      report('alerts-condition', file, `${rule.label} (${what}) must add up the refusals (timeAggregation Total of a column)`);
    }
    if (rawField(rule, 'properties.actions.actionGroups') === undefined) {
      report('alerts-notify', file, `${rule.label} (${what}) names no action groups`);
    }
  }
  // Who gets told is the deployer's to say: no address in the templates, and no action group
  // unless one was given.
  for (const scope of model.scopes) {
    for (const s of stringsIn(ownTree(scope))) {
      for (const m of s.matchAll(/[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g)) {
        report('alerts-notify', scope.file, `a fixed e-mail address: ${m[0]}`);
      }
    }
  }
  for (const group of live.filter((r) => r.type === 'Microsoft.Insights/actionGroups')) {
    if (group.condition === undefined)
      report('alerts-notify', group.scope.file, `${group.label} is created even when no address was given`);
    const receivers = rawField(group, 'properties.emailReceivers');
    for (const receiver of (Array.isArray(receivers) ? receivers : []) as { emailAddress?: unknown }[]) {
      if (rootParameter(toRoot(group.scope, fromJson(receiver.emailAddress))) === undefined) {
        report('alerts-notify', group.scope.file, `${group.label} must take its address from a parameter`);
      }
    }
  }

  const workbooks = live.filter((r) => r.type === 'Microsoft.Insights/workbooks');
  if (workbooks.length !== 1) report('workbook', ALL_BICEP, `expected one workbook, found ${workbooks.length}`);
  for (const workbook of workbooks) {
    const file = workbook.scope.file;
    if (!isComponent(workbook.scope, field(workbook, 'properties.sourceId')))
      report('workbook', file, `${workbook.label} must belong to the Application Insights component`);
    const data = field(workbook, 'properties.serializedData');
    const resolved = data && toRoot(workbook.scope, data);
    const content = isCall(resolved, 'string') ? (resolved.args[0] as Expr) : resolved;
    const items = content ? itemsOf(only(entriesOf(content).entries, 'items')?.value ?? fromJson([])) : [];
    const charted = items.map((item) => {
      const itemContent = only(entriesOf(item).entries, 'content')?.value;
      return textOf(itemContent && only(entriesOf(itemContent).entries, 'query')?.value) ?? '';
    });
    for (const metric of BATON_METRICS) {
      if (!charted.some((query) => query.includes(`"${metric}"`)))
        report('workbook', file, `${workbook.label} does not chart ${metric}`);
    }
  }
  return problems;
}

/** The literal azd-service-name tag on the function app, for azure.yaml to match. */
export function serviceTagOf(files: Pick<InfraFiles, 'template' | 'hashes'>): string | undefined {
  for (const site of modelOf(files).resources.filter((r) => r.type === 'Microsoft.Web/sites' && !r.existing)) {
    const tag = serviceTagIn(site);
    if (tag) return tag;
  }
  return undefined;
}

// --- main.parameters.json -------------------------------------------------------------------

export function lintParameters(parametersJson: string, template: ArmTemplateJson): string[] {
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
  const declared = template.parameters ?? {};
  for (const [name, entry] of Object.entries(values)) {
    if (!(name in declared)) report('params-file-unknown', `${name} is not a parameter of main.bicep`);
    if (typeof entry.value === 'string' && entry.value.includes('$') && !/^\$\{[A-Z][A-Z0-9_]*\}$/.test(entry.value)) {
      report('params-file-azd', `${name} must be one azd variable, "\${NAME}"`);
    }
  }
  for (const [name, p] of Object.entries(declared)) {
    if (!('defaultValue' in p) && !(name in values)) report('params-file-required', `${name} has no default and no value here`);
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
  // The service's prepackage hook stages the package; the project's postprovision hook sets what
  // the template cannot (the site update strategy). Each runs a script of ours with node, on both.
  for (const [where, hooks] of [
    [`services.${name}.hooks.prepackage`, map(map(service.hooks)?.prepackage)],
    ['hooks.postprovision', map(map(doc.hooks)?.postprovision)],
  ] as const) {
    for (const [platform, shell] of [
      ['posix', 'sh'],
      ['windows', 'pwsh'],
    ] as const) {
      const hook = map(hooks?.[platform]);
      const script = /^node\s+(\S+)$/.exec(typeof hook?.run === 'string' ? hook.run : '')?.[1];
      if (hook?.shell !== shell || !script || !expect.exists(script)) {
        report('yaml-hook', `${where}.${platform} must run an existing script with node, in ${shell}`);
      }
    }
  }
  return problems;
}

/** Every rule over every deployment file. */
export function lintInfra(files: InfraFiles, expect: InfraExpectations): string[] {
  return [
    ...lintTemplate(files, expect),
    ...lintBicepSources(files.bicep),
    ...lintBatonSettings(files, expect),
    ...lintMonitoring(files),
    ...lintParameters(files.parametersJson, files.template),
    ...lintHostJson(files.hostJson, expect),
    ...lintAzureYaml(files.azureYaml, serviceTagOf(files), expect),
  ];
}
