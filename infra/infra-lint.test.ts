import { DEFAULT_AUDIT_CONTAINER } from '../functions/jobs';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  APP_PEERS,
  FUNCIGNORE,
  INSTALL_ARGS,
  APP_MAIN,
  PACKAGE_FILES,
  STAGE_DIR,
  appManifest,
  stagePackage,
} from './hooks/stage-package.mjs';
import { hubResources } from '../src/hub/resources';
import { pendingRequests } from '../src/hub/requests';
import type { DocumentStore } from '../src/fencing/document-store';
import { parseBatonSettings, parseLogLevel } from '../src/app/settings';
import { parseArmString, show, type Expr } from '../test/support/arm-expression';
import type { ArmResourceJson, ArmTemplateJson } from '../test/support/arm-template';
import {
  MAIN_BICEP,
  lintAzureYaml,
  lintInfra,
  parseSimpleYaml,
  readInfraFiles,
  ruleOf,
  serviceTagOf,
  type InfraExpectations,
  type InfraFiles,
} from '../test/support/infra-lint';

// The deployment files as Azure would get them: infra/ compiled once by the real Bicep CLI, and
// the template it emits checked as data. The real files must pass every rule, and for every rule
// a copy broken on purpose must fail it, which shows the rule can fail at all. The broken copies
// are edits of the compiled template (a compile per copy would cost seconds each), made where
// the Bicep edit would have landed.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { main: string; files: string[] };
const defaults = parseBatonSettings({});
const resources = hubResources('hub');

/**
 * Where requests go in the hub container, as the leader lists them: the first step of an async
 * generator runs as `next()` is called, so the listing is asked for before anything is awaited.
 */
function requestPrefix(): string {
  let listed: string | undefined;
  const docs = {
    list(prefix: string): AsyncIterable<string> {
      listed = prefix;
      return { [Symbol.asyncIterator]: () => ({ next: async () => ({ done: true, value: undefined }) }) };
    },
  } as unknown as DocumentStore;
  void pendingRequests(docs)[Symbol.asyncIterator]().next();
  if (listed === undefined) throw new Error('pendingRequests listed nothing');
  return listed;
}

/**
 * Every setting the Functions app reads: the names settings.ts parses, and the App settings table
 * of docs/settings.md (the local cluster's own settings come after it and are not the app's).
 */
function batonSettingNames(): string[] {
  const parsed = readFileSync(join(root, 'src', 'app', 'settings.ts'), 'utf8').matchAll(/'(BATON_[A-Z0-9_]+)'/g);
  const docs = readFileSync(join(root, 'docs', 'settings.md'), 'utf8');
  const table = docs.slice(docs.indexOf('## App settings'), docs.indexOf('The local cluster'));
  const documented = table.matchAll(/^\| `(BATON_[A-Z0-9_]+)`/gm);
  return [...new Set([...parsed, ...documented].map((m) => m[1] as string))].sort();
}

/** Each setting's default as its main.bicep parameter must have it; '' where Baton's default is "unset". */
const SETTING_DEFAULTS: Record<string, string | number | boolean> = {
  BATON_HUB: defaults.hub,
  BATON_LEASE_SECONDS: defaults.leaseDurationSeconds,
  // Two thirds of the lease, which Baton works out when the setting is blank.
  BATON_RENEW_DEADLINE_SECONDS: '',
  BATON_TAKEOVER_MS: defaults.takeoverMs ?? 0,
  BATON_LEASE_CONTAINER: defaults.leaseContainer,
  BATON_COORDINATOR_SCHEDULE: defaults.coordinatorSchedule,
  BATON_TERM_SECONDS: defaults.termSeconds,
  BATON_REST_WHEN_IDLE: defaults.restWhenIdle,
  BATON_MAX_ATTEMPTS: defaults.maxAttempts,
  BATON_MAX_IN_FLIGHT: defaults.maxInFlightMessages,
  BATON_LOG_LEVEL: parseLogLevel({}),
  BATON_QUEUE_SHARDS: defaults.queueShards,
  BATON_RETENTION_DAYS: defaults.retention.runDays,
  // As long as the run, which Baton works out when the setting is blank.
  BATON_OUTPUT_RETENTION_DAYS: '',
  BATON_ENGINE: defaults.engine,
  BATON_METRICS_EXPORTER: 'none',
  BATON_AUDIT_CONTAINER: DEFAULT_AUDIT_CONTAINER,
  BATON_SYNTHETIC_JOBS: '',
  // The package's version, which Baton reads when the setting is blank.
  BATON_APP_VERSION: '',
  BATON_LEADER_PRIORITY: defaults.leaderPriority,
  BATON_HTTP_AUTH: defaults.httpAuth,
  // The reference app runs its sample unless told not to; a deploy leaves it out unless asked.
  BATON_SAMPLE_JOB: false,
};
const settingNames = batonSettingNames();

const expectations: InfraExpectations = {
  hub: defaults.hub,
  leaseSeconds: defaults.leaseDurationSeconds,
  coordinatorSchedule: defaults.coordinatorSchedule,
  leaseContainer: defaults.leaseContainer,
  auditContainer: DEFAULT_AUDIT_CONTAINER,
  maxAttempts: defaults.maxAttempts,
  hubSuffixes: [resources.workQueue, resources.resultsQueue, resources.poisonQueue, resources.container].map((name) =>
    name.slice('hub'.length),
  ),
  hubContainerSuffix: resources.container.slice('hub'.length),
  // The wake is a tick on shard 0's work queue (src/hub/wake.ts).
  wakeQueueSuffix: resources.workQueue.slice('hub'.length),
  requestPrefix: requestPrefix(),
  maximumInstanceCount: 40,
  packageMain: APP_MAIN,
  stagedPaths: Object.keys(PACKAGE_FILES),
  stageDir: STAGE_DIR,
  exists: (path) => existsSync(join(root, path)),
  batonSettings: Object.fromEntries(
    settingNames.map((name) => [name, SETTING_DEFAULTS[name] ?? `(no default known for ${name})`]),
  ),
};

/** The real files, infra/ compiled once for the file (the compiler takes seconds). */
let real: InfraFiles;

const FUNCTION_APP = 'infra/modules/function-app.bicep';
const STORAGE = 'infra/modules/storage.bicep';
const STORAGE_ACCESS = 'infra/modules/storage-access.bicep';
const MONITORING = 'infra/modules/monitoring.bicep';
const IDENTITY = 'infra/modules/identity.bicep';
const ALERTS = 'infra/modules/alerts.bicep';
const PARAMETERS = 'infra/main.parameters.json';
const OTHER_GUID = '00000000-0000-0000-0000-000000000001';
const STORAGE_BLOB_DATA_READER = '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1';
const STORAGE_QUEUE_DATA_READER = '19e7f393-937e-4f77-808e-94535e297925';

type FileName = string;
type Mutate = (files: InfraFiles) => InfraFiles;
type Json = Record<string, any>;

// --- editing the compiled template ------------------------------------------------------------

/** The template compiled from `file` inside `template` (main.bicep's own, or a module's), found by its templateHash. */
function templateOf(files: InfraFiles, template: ArmTemplateJson, file: FileName): ArmTemplateJson {
  if (file === MAIN_BICEP) return template;
  const hash = files.hashes[file];
  const search = (at: ArmTemplateJson): ArmTemplateJson | undefined => {
    if (at.metadata?._generator?.templateHash === hash) return at;
    for (const r of Object.values(at.resources ?? {}) as ArmResourceJson[]) {
      const inner = (r.properties as { template?: ArmTemplateJson } | undefined)?.template;
      const found = inner && search(inner);
      if (found) return found;
    }
    return undefined;
  };
  const found = search(template);
  if (!found) throw new Error(`no template compiled from ${file}`);
  return found;
}

/**
 * A resource of a template: by symbolic name (languageVersion 2.0), or the first whose name
 * contains `key` (a resources array, where main.bicep's modules are too).
 */
function resourceOf(template: ArmTemplateJson, key: string): Json {
  const resources = template.resources ?? [];
  const found = Array.isArray(resources)
    ? resources.find((r) => r.name.includes(key))
    : (resources as Record<string, ArmResourceJson>)[key];
  if (!found) throw new Error(`no resource ${key} to break`);
  return found;
}

/** The object at a dotted path; every step must exist, so a breakage whose target is gone fails loudly. */
function at(obj: Json, path: string): { parent: Json; key: string } {
  const keys = path.split('.');
  const key = keys.pop() as string;
  let parent: any = obj;
  for (const k of keys) {
    if (parent === null || typeof parent !== 'object' || !(k in parent)) throw new Error(`nothing at ${path} to break`);
    parent = parent[k];
  }
  if (parent === null || typeof parent !== 'object') throw new Error(`nothing at ${path} to break`);
  return { parent, key };
}

function set(obj: Json, path: string, value: unknown, options: { create?: boolean } = {}) {
  const { parent, key } = at(obj, path);
  if (!options.create && !(key in parent)) throw new Error(`nothing at ${path} to break`);
  parent[key] = value;
}

function remove(obj: Json, path: string) {
  const { parent, key } = at(obj, path);
  if (!(key in parent)) throw new Error(`nothing at ${path} to break`);
  delete parent[key];
}

/** Replaces text in the string at `path`. */
function replaceAt(obj: Json, path: string, from: string | RegExp, to: string) {
  const { parent, key } = at(obj, path);
  const text = parent[key];
  if (typeof text !== 'string' || !(typeof from === 'string' ? text.includes(from) : from.test(text))) {
    throw new Error(`${path} has no ${String(from)} to break`);
  }
  parent[key] = text.replace(from, to);
}

/** A copy of the files with the template compiled from `file` edited. */
function edit(file: FileName, change: (template: Json) => void): Mutate {
  return (files) => {
    const template = structuredClone(files.template);
    change(templateOf(files, template, file) as Json);
    return { ...files, template };
  };
}

/** A copy with one resource of `file`'s template edited. */
function editResource(file: FileName, key: string, change: (resource: Json) => void): Mutate {
  return edit(file, (template) => change(resourceOf(template as ArmTemplateJson, key)));
}

/** A copy with the JSON at `path` set, in resource `key` of `file`'s template or, without a key, in the template itself. */
function setIn(file: FileName, key: string | undefined, path: string, value: unknown): Mutate {
  return edit(file, (template) => set(key === undefined ? template : resourceOf(template as ArmTemplateJson, key), path, value));
}

/** The app settings' `createObject(...)` arguments, as trees, edited and written back. */
function editAppSettings(change: (args: Expr[]) => void): Mutate {
  return editResource(FUNCTION_APP, 'appSettings', (settings) => {
    const value = parseArmString(settings.properties as string);
    const object = value.kind === 'call' && value.name === 'union' ? value.args[0] : undefined;
    if (object?.kind !== 'call' || object.name !== 'createObject')
      throw new Error('the app settings are not union(createObject(...), ...)');
    change(object.args);
    settings.properties = `[${show(value)}]`;
  });
}

function addAppSetting(name: string, value: string): Mutate {
  return editAppSettings((args) => args.push({ kind: 'string', value: name }, parseArmString(`[${value}]`)));
}

function removeAppSetting(name: string): Mutate {
  return editAppSettings((args) => {
    const index = args.findIndex((arg, i) => i % 2 === 0 && arg.kind === 'string' && arg.value === name);
    if (index < 0) throw new Error(`no app setting ${name} to break`);
    args.splice(index, 2);
  });
}

function setAppSetting(name: string, value: string): Mutate {
  return editAppSettings((args) => {
    const index = args.findIndex((arg, i) => i % 2 === 0 && arg.kind === 'string' && arg.value === name);
    if (index < 0) throw new Error(`no app setting ${name} to break`);
    args[index + 1] = parseArmString(`[${value}]`);
  });
}

/** The alert rules' one criterion. */
const criterion = (rule: Json): Json => rule.properties.criteria.allOf[0];

// --- editing the other files -------------------------------------------------------------------

function textOf(files: InfraFiles, file: FileName): string {
  if (file === 'azure.yaml') return files.azureYaml;
  if (file === 'host.json') return files.hostJson;
  if (file === PARAMETERS) return files.parametersJson;
  const text = files.bicep[file];
  if (text === undefined) throw new Error(`no ${file}`);
  return text;
}

function withText(files: InfraFiles, file: FileName, text: string): InfraFiles {
  if (file === 'azure.yaml') return { ...files, azureYaml: text };
  if (file === 'host.json') return { ...files, hostJson: text };
  if (file === PARAMETERS) return { ...files, parametersJson: text };
  return { ...files, bicep: { ...files.bicep, [file]: text } };
}

/** Replaces the first match; a breakage whose target text is gone fails loudly instead of passing. */
function replace(file: FileName, from: string | RegExp, to: string): Mutate {
  return (files) => {
    const text = textOf(files, file);
    const found = typeof from === 'string' ? text.includes(from) : from.test(text);
    if (!found) throw new Error(`${file} has no ${String(from)} to break`);
    return withText(files, file, text.replace(from, to));
  };
}

function append(file: FileName, text: string): Mutate {
  return (files) => withText(files, file, `${textOf(files, file)}\n${text}\n`);
}

function editJson(file: FileName, change: (doc: Record<string, any>) => void): Mutate {
  return (files) => {
    const doc = JSON.parse(textOf(files, file)) as Record<string, any>;
    change(doc);
    return withText(files, file, JSON.stringify(doc, null, 2));
  };
}

/** The one resource of `type` in a template's resources array whose name holds every key. */
function resourceWhere(template: Json, type: string, ...keys: string[]): Json {
  const found = (template.resources as ArmResourceJson[]).filter((r) => r.type === type && keys.every((k) => r.name.includes(k)));
  if (found.length !== 1) throw new Error(`${found.length} resources of ${type} named with ${keys.join(', ')} to break`);
  return found[0] as Json;
}

/** The deployer's role assignment in storage-access.bicep whose name holds every key. */
const deployerRole =
  (...keys: string[]) =>
  (template: Json): Json =>
    resourceWhere(template, 'Microsoft.Authorization/roleAssignments', "parameters('deployerPrincipalId')", ...keys);
const hubRead = deployerRole("parameters('hubContainerName')", "variables('storageBlobDataReader')");
const leaseRead = deployerRole("parameters('leaseContainerName')", "variables('storageBlobDataReader')");
const wakeSend = deployerRole("variables('storageQueueDataMessageSender')");
const requestWrite = deployerRole("'Microsoft.Authorization/roleDefinitions'");
const requestWriter = (template: Json): Json => resourceWhere(template, 'Microsoft.Authorization/roleDefinitions');
const writerPermissions = (template: Json): Json => requestWriter(template).properties.permissions[0];
const ACCOUNT_ID = "[resourceId('Microsoft.Storage/storageAccounts', parameters('storageAccountName'))]";

const storageParams = (main: Json) => resourceOf(main, 'storage').properties.parameters;
const storageAccessParams = (main: Json) => resourceOf(main, 'storage-access').properties.parameters;
const appParams = (main: Json) => resourceOf(main, 'function-app').properties.parameters;

/** [what breaks, the rule that must catch it, the breakage]. */
const breakages: [string, string, Mutate][] = [
  // The deployer's access.
  [
    'the deployer gets Storage Blob Data Owner',
    'role-deployer',
    editResource(STORAGE_ACCESS, 'storageBlobDataReader', (r) =>
      replaceAt(r, 'properties.roleDefinitionId', "variables('storageBlobDataReader')", "variables('storageBlobDataOwner')"),
    ),
  ],
  [
    'the deployer can read queue messages',
    'role-deployer',
    editResource(STORAGE_ACCESS, 'storageQueueDataMessageSender', (r) =>
      set(
        r,
        'properties.roleDefinitionId',
        `[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '${STORAGE_QUEUE_DATA_READER}')]`,
      ),
    ),
  ],
  [
    "a deployer's role is assigned when no deployer is named",
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => set(wakeSend(t), 'condition', "[parameters('deployerCanSteer')]")),
  ],
  [
    'the deployer gets a role on the whole group',
    'role-deployer',
    editResource(STORAGE_ACCESS, 'storageBlobDataReader', (r) => set(r, 'scope', '[resourceGroup().id]')),
  ],
  ['the deployer reads the whole account', 'role-deployer', edit(STORAGE_ACCESS, (t) => set(hubRead(t), 'scope', ACCOUNT_ID))],
  [
    "the deployer reads the app's package container",
    'role-deployer',
    edit(STORAGE_ACCESS, (t) =>
      set(
        leaseRead(t),
        'scope',
        "[resourceId('Microsoft.Storage/storageAccounts/blobServices/containers', parameters('storageAccountName'), 'default', parameters('deploymentContainerName'))]",
      ),
    ),
  ],
  [
    'the deployer cannot read the lease',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => {
      const resources = t.resources as Json[];
      resources.splice(resources.indexOf(leaseRead(t)), 1);
    }),
  ],
  [
    'steering replaces reading instead of adding to it',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) =>
      set(hubRead(t), 'condition', "[and(variables('deployerNamed'), not(parameters('deployerCanSteer')))]"),
    ),
  ],
  [
    'the deployer steers with Storage Blob Data Contributor',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) =>
      set(
        requestWrite(t),
        'properties.roleDefinitionId',
        "[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'ba92f5b4-2d11-453d-a403-e96b0029c9fe')]",
      ),
    ),
  ],
  [
    'the request writer is on the account',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => set(requestWrite(t), 'scope', ACCOUNT_ID)),
  ],
  [
    'the request writer has no condition',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => remove(requestWrite(t), 'properties.condition')),
  ],
  [
    "the request writer's condition has no version",
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => remove(requestWrite(t), 'properties.conditionVersion')),
  ],
  [
    'the request writer writes under another prefix',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => replaceAt(t, 'variables.requestWriteCondition', "'requests/'", "'runs/'")),
  ],
  [
    "the request writer's condition limits another action",
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => replaceAt(t, 'variables.requestWriteCondition', 'blobs/write', 'blobs/read')),
  ],
  [
    "the request writer's condition has a second way in",
    'role-deployer',
    edit(STORAGE_ACCESS, (t) =>
      replaceAt(
        t,
        'variables.requestWriteCondition',
        "StringStartsWith 'requests/'",
        "StringStartsWith 'requests/' OR @Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] StringStartsWith 'deploy'",
      ),
    ),
  ],
  [
    'the request writer may delete blobs',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) =>
      (writerPermissions(t).dataActions as string[]).push(
        'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/delete',
      ),
    ),
  ],
  [
    'the request writer may create or change containers',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) =>
      (writerPermissions(t).actions as string[]).push('Microsoft.Storage/storageAccounts/blobServices/containers/write'),
    ),
  ],
  [
    'the request writer may delete the hub container',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) =>
      (writerPermissions(t).actions as string[]).push('Microsoft.Storage/storageAccounts/blobServices/containers/delete'),
    ),
  ],
  [
    'the request writer is assignable in the whole subscription',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => set(requestWriter(t), 'properties.assignableScopes', ['[subscription().id]'])),
  ],
  [
    'the request writer has a fixed name',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => set(requestWriter(t), 'properties.roleName', 'Baton request writer')),
  ],
  [
    'the request writer is created without steering',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => set(requestWriter(t), 'condition', "[variables('deployerNamed')]")),
  ],
  [
    'the wake is sent without steering',
    'role-deployer',
    edit(STORAGE_ACCESS, (t) => set(wakeSend(t), 'condition', "[variables('deployerNamed')]")),
  ],
  ['the wake role is on the account', 'role-deployer', edit(STORAGE_ACCESS, (t) => set(wakeSend(t), 'scope', ACCOUNT_ID))],
  [
    'the wake role is on the results queue',
    'role-deployer',
    edit(MAIN_BICEP, (t) => set(storageAccessParams(t), 'wakeQueueName.value', "[format('{0}-results', parameters('hubName'))]")),
  ],
  [
    "the deployer's roles do not wait for the hub's containers and queues",
    'role-deployer',
    edit(MAIN_BICEP, (t) => {
      const module = resourceOf(t, 'storage-access');
      module.dependsOn = (module.dependsOn as string[]).filter((d) => !d.endsWith("'storage')]"));
    }),
  ],
  [
    'the deployer can be a principal type not allowed',
    'role-principal-type',
    setIn(MAIN_BICEP, undefined, 'parameters.deployerPrincipalType.allowedValues', [
      'User',
      'Group',
      'ServicePrincipal',
      'ForeignGroup',
    ]),
  ],

  // The sample only when asked for.
  [
    "the sample's container is created without the sample",
    'sample-only-when-asked',
    edit(MAIN_BICEP, (t) =>
      replaceAt(
        storageParams(t),
        'containerNames.value',
        "if(parameters('sampleJob'), createArray(parameters('auditContainerName')), createArray())",
        "createArray(parameters('auditContainerName'))",
      ),
    ),
  ],
  [
    "the sample's container is never created",
    'sample-only-when-asked',
    edit(MAIN_BICEP, (t) =>
      replaceAt(
        storageParams(t),
        'containerNames.value',
        "if(parameters('sampleJob'), createArray(parameters('auditContainerName')), createArray())",
        'createArray()',
      ),
    ),
  ],
  [
    "the sample's container setting is written without the sample",
    'baton-settings-wiring',
    edit(FUNCTION_APP, (t) =>
      replaceAt(
        t,
        'variables.sampleSettings',
        /^\[if\(parameters\('sampleJob'\), (createObject\(.*\)), createObject\(\)\)\]$/,
        '[$1]',
      ),
    ),
  ],

  // No public-cloud assumption, and the host's storage by name where the cloud allows it.
  [
    'the storage service URIs are set in the public cloud too',
    'app-settings-host-storage',
    edit(FUNCTION_APP, (t) =>
      replaceAt(
        t,
        'variables.storageEndpointSettings',
        /^\[if\(equals\(environment\(\)\.name, 'AzureCloud'\), createObject\(\), (.*)\)\]$/,
        '[$1]',
      ),
    ),
  ],

  // Entra sign-in, as an option.
  [
    'Entra sign-in is on with keys too',
    'entra-sign-in',
    editResource(FUNCTION_APP, 'entraSignIn', (r) => remove(r, 'condition')),
  ],
  [
    'Entra sign-in lets unsigned callers through',
    'entra-sign-in',
    editResource(FUNCTION_APP, 'entraSignIn', (r) => set(r, 'properties.globalValidation.requireAuthentication', false)),
  ],
  [
    'Entra sign-in keeps a client secret',
    'entra-sign-in',
    editResource(FUNCTION_APP, 'entraSignIn', (r) =>
      set(r, 'properties.identityProviders.azureActiveDirectory.registration.clientSecretSettingName', 'AUTH_SECRET', {
        create: true,
      }),
    ),
  ],
  [
    'Entra sign-in keeps tokens in a store',
    'entra-sign-in',
    editResource(FUNCTION_APP, 'entraSignIn', (r) => set(r, 'properties.login.tokenStore.enabled', true)),
  ],
  [
    "Entra sign-in names the public cloud's issuer",
    'entra-sign-in',
    editResource(FUNCTION_APP, 'entraSignIn', (r) =>
      set(
        r,
        'properties.identityProviders.azureActiveDirectory.registration.openIdIssuer',
        "[format('https://login.microsoftonline.com/{0}/v2.0', tenant().tenantId)]",
      ),
    ),
  ],
  [
    'Entra sign-in takes a fixed app registration',
    'entra-sign-in',
    editResource(FUNCTION_APP, 'entraSignIn', (r) =>
      set(r, 'properties.identityProviders.azureActiveDirectory.registration.clientId', '00000000-0000-0000-0000-000000000002'),
    ),
  ],
  ['there is no Entra option', 'entra-sign-in', edit(FUNCTION_APP, (t) => delete t.resources.entraSignIn)],

  // Keys and secrets, in any form.
  [
    'the account key is read with listKeys()',
    'no-list-keys',
    edit(STORAGE, (t) =>
      set(
        t,
        'variables',
        {
          accountKey:
            "[listKeys(resourceId('Microsoft.Storage/storageAccounts', parameters('name')), '2025-06-01').keys[0].value]",
        },
        { create: true },
      ),
    ),
  ],
  [
    'an account SAS is minted',
    'no-list-keys',
    edit(STORAGE, (t) =>
      set(
        t,
        'variables',
        {
          sas: "[listAccountSas(resourceId('Microsoft.Storage/storageAccounts', parameters('name')), '2023-05-01', createObject()).accountSasToken]",
        },
        { create: true },
      ),
    ),
  ],
  [
    'an app setting holds an AccountKey connection string',
    'no-key-material',
    addAppSetting('LEGACY', "'AccountName=x;AccountKey=abc'"),
  ],
  [
    'an app setting holds a SAS URL',
    'no-key-material',
    addAppSetting('PACKAGE_URL', "'https://x.blob.core.windows.net/c/p.zip?sv=2022-11-02&sig=abc'"),
  ],
  [
    'an app setting holds a SharedAccessSignature',
    'no-key-material',
    addAppSetting('LEGACY', "'BlobEndpoint=https://x;SharedAccessSignature=sv=1'"),
  ],
  [
    'an app setting holds a connection string',
    'no-key-material',
    addAppSetting('LEGACY', "'DefaultEndpointsProtocol=https;AccountName=x'"),
  ],
  [
    'a key is pasted into a comment',
    'no-key-material',
    append(FUNCTION_APP, '// DefaultEndpointsProtocol=https;AccountName=x;AccountKey=abc'),
  ],
  ['listKeys() is left in a comment', 'no-list-keys', append(STORAGE, '// var key = storage.listKeys().keys[0].value')],
  ['the Owner role is named in a comment', 'role-forbidden', append(STORAGE_ACCESS, '// 8e3af657-a8ff-443c-a75c-2fe8c4bcb635')],

  // The storage account.
  ['shared keys are allowed', 'storage-shared-key', setIn(STORAGE, 'storage', 'properties.allowSharedKeyAccess', true)],
  [
    'shared-key access comes from a variable',
    'storage-shared-key',
    setIn(STORAGE, 'storage', 'properties.allowSharedKeyAccess', "[variables('allowKeys')]"),
  ],
  ['TLS 1.0 is accepted', 'storage-tls', setIn(STORAGE, 'storage', 'properties.minimumTlsVersion', 'TLS1_0')],
  ['blobs may be public', 'storage-public-blob', setIn(STORAGE, 'storage', 'properties.allowBlobPublicAccess', true)],
  ['plain HTTP is accepted', 'storage-https-only', setIn(STORAGE, 'storage', 'properties.supportsHttpsTrafficOnly', false)],
  [
    'the portal defaults to keys',
    'storage-oauth-default',
    setIn(STORAGE, 'storage', 'properties.defaultToOAuthAuthentication', false),
  ],
  [
    'no storage account is created',
    'storage-account',
    editResource(STORAGE, 'storage', (r) => set(r, 'existing', true, { create: true })),
  ],
  ['a container is public', 'container-public-access', setIn(STORAGE, 'containers', 'properties.publicAccess', 'Blob')],
  [
    'the package container is public',
    'container-public-access',
    setIn(STORAGE_ACCESS, 'deploymentContainerName', 'properties.publicAccess', 'Container'),
  ],
  [
    'the poison queue is misnamed',
    'hub-resources',
    edit(MAIN_BICEP, (t) => replaceAt(storageParams(t), 'queueNames.value', "'{0}-work-poison'", "'{0}-poison'")),
  ],
  [
    'the runs container is missing',
    'hub-resources',
    edit(MAIN_BICEP, (t) => replaceAt(storageParams(t), 'containerNames.value', "'{0}-runs'", "'{0}-records'")),
  ],
  [
    "the lease container is not Baton's",
    'hub-resources',
    setIn(MAIN_BICEP, undefined, 'parameters.leaseContainerName.defaultValue', 'locks'),
  ],
  [
    "the audit container is not Baton's",
    'hub-resources',
    setIn(MAIN_BICEP, undefined, 'parameters.auditContainerName.defaultValue', 'audit'),
  ],

  // Roles.
  [
    'blob access is read-only',
    'role-blob-data',
    setIn(STORAGE_ACCESS, undefined, 'variables.storageBlobDataOwner', STORAGE_BLOB_DATA_READER),
  ],
  [
    'blob access goes to another principal',
    'role-blob-data',
    setIn(STORAGE_ACCESS, 'storageBlobDataOwner', 'properties.principalId', "[parameters('deploymentContainerName')]"),
  ],
  [
    "the data roles go to the identity's client id",
    'role-blob-data',
    edit(MAIN_BICEP, (t) =>
      replaceAt(storageAccessParams(t), 'principalId.value', '.outputs.principalId.value', '.outputs.clientId.value'),
    ),
  ],
  [
    'queue access is read-only',
    'role-queue-data',
    setIn(STORAGE_ACCESS, undefined, 'variables.storageQueueDataContributor', STORAGE_QUEUE_DATA_READER),
  ],
  [
    'the identity is made Owner',
    'role-forbidden',
    setIn(STORAGE_ACCESS, undefined, 'variables.storageBlobDataOwner', '8e3af657-a8ff-443c-a75c-2fe8c4bcb635'),
  ],
  [
    'the identity is made Contributor',
    'role-forbidden',
    setIn(
      STORAGE_ACCESS,
      'storageBlobDataOwner',
      'properties.roleDefinitionId',
      "[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'b24988ac-6180-42a0-ab88-20f7382dd24c')]",
    ),
  ],
  [
    'the role is whatever a parameter says',
    'role-forbidden',
    setIn(STORAGE_ACCESS, 'storageBlobDataOwner', 'properties.roleDefinitionId', "[parameters('deploymentContainerName')]"),
  ],
  [
    'the identity may list keys',
    'role-forbidden',
    setIn(STORAGE_ACCESS, undefined, 'variables.storageQueueDataContributor', '17d1049b-9a84-46fb-8f53-869881c3d3ab'),
  ],
  [
    'a role is assigned on the subscription',
    'role-scope',
    setIn(STORAGE_ACCESS, 'storageBlobDataOwner', 'scope', '[subscription().id]'),
  ],
  [
    'a role is assigned on the resource group',
    'role-scope',
    setIn(STORAGE_ACCESS, 'storageBlobDataOwner', 'scope', '[resourceGroup().id]'),
  ],
  [
    'a role assignment has no scope',
    'role-scope',
    editResource(STORAGE_ACCESS, 'storageBlobDataOwner', (r) => remove(r, 'scope')),
  ],
  [
    'a role is assigned on the workspace',
    'role-scope',
    editResource(MONITORING, 'publisher', (r) =>
      set(r, 'scope', "[resourceId('Microsoft.OperationalInsights/workspaces', parameters('workspaceName'))]"),
    ),
  ],
  [
    'a role goes to a user',
    'role-principal-type',
    setIn(STORAGE_ACCESS, 'storageQueueDataContributor', 'properties.principalType', 'User'),
  ],
  [
    'the durable engine cannot reach its tables',
    'role-table-data',
    setIn(STORAGE_ACCESS, undefined, 'variables.storageTableDataContributor', OTHER_GUID),
  ],
  [
    'the queue engine gets table access too',
    'role-table-data',
    editResource(STORAGE_ACCESS, 'storageTableDataContributor', (r) => remove(r, 'condition')),
  ],
  [
    'table access does not follow the engine',
    'role-table-data',
    edit(MAIN_BICEP, (t) => set(storageAccessParams(t), 'grantTableData.value', true)),
  ],
  ['a role assignment has a fixed name', 'role-name-guid', setIn(STORAGE_ACCESS, 'storageBlobDataOwner', 'name', 'blob-data')],

  // The identity.
  ['the app runs as a system identity', 'identity', setIn(FUNCTION_APP, 'app', 'identity.type', 'SystemAssigned')],
  [
    'the app runs as another identity',
    'identity',
    setIn(FUNCTION_APP, 'app', 'identity.userAssignedIdentities', { "[parameters('planName')]": {} }),
  ],
  [
    'the app runs as a second identity too',
    'identity',
    editResource(FUNCTION_APP, 'app', (r) => (r.identity.userAssignedIdentities["[parameters('planName')]"] = {})),
  ],
  [
    'no user-assigned identity is created',
    'identity',
    editResource(IDENTITY, 'identity', (r) => set(r, 'existing', true, { create: true })),
  ],

  // The function app.
  ['the plan is Consumption', 'flex-plan', setIn(FUNCTION_APP, 'plan', 'sku.name', 'Y1')],
  ['the plan tier is Dynamic', 'flex-plan', setIn(FUNCTION_APP, 'plan', 'sku.tier', 'Dynamic')],
  ['the app is not a Linux function app', 'flex-site', setIn(FUNCTION_APP, 'app', 'kind', 'functionapp')],
  [
    'the app has no functionAppConfig',
    'flex-site',
    editResource(FUNCTION_APP, 'app', (r) => {
      r.properties.siteProperties = r.properties.functionAppConfig;
      remove(r, 'properties.functionAppConfig');
    }),
  ],
  ['Node 20', 'flex-runtime', setIn(FUNCTION_APP, 'app', 'properties.functionAppConfig.runtime.version', '20')],
  ['Python', 'flex-runtime', setIn(FUNCTION_APP, 'app', 'properties.functionAppConfig.runtime.name', 'python')],
  [
    '4 GB instances',
    'flex-scale',
    setIn(FUNCTION_APP, 'app', 'properties.functionAppConfig.scaleAndConcurrency.instanceMemoryMB', 4096),
  ],
  [
    'a fixed instance limit',
    'flex-scale',
    setIn(FUNCTION_APP, 'app', 'properties.functionAppConfig.scaleAndConcurrency.maximumInstanceCount', 100),
  ],
  [
    'main.bicep passes a fixed instance limit',
    'flex-scale',
    edit(MAIN_BICEP, (t) => set(appParams(t), 'maximumInstanceCount.value', 100)),
  ],
  [
    'the package is read with a connection string',
    'flex-deployment-identity',
    setIn(
      FUNCTION_APP,
      'app',
      'properties.functionAppConfig.deployment.storage.authentication.type',
      'StorageAccountConnectionString',
    ),
  ],
  [
    'the package is read as another identity',
    'flex-deployment-identity',
    setIn(
      FUNCTION_APP,
      'app',
      'properties.functionAppConfig.deployment.storage.authentication.userAssignedIdentityResourceId',
      "[parameters('planName')]",
    ),
  ],
  ['HTTP is served', 'https-only', setIn(FUNCTION_APP, 'app', 'properties.httpsOnly', false)],
  ['TLS 1.0 is served', 'site-tls', setIn(FUNCTION_APP, 'app', 'properties.siteConfig.minTlsVersion', '1.0')],
  ['FTP credentials are on', 'basic-auth', setIn(FUNCTION_APP, 'ftpPublishing', 'properties.allow', true)],
  [
    'the SCM policy is missing',
    'basic-auth',
    editResource(FUNCTION_APP, 'scmPublishing', (r) => replaceAt(r, 'name', "'scm'", "'scm-disabled'")),
  ],
  ['no azd-env-name tag', 'tags', setIn(MAIN_BICEP, undefined, 'variables.tags', { env: "[parameters('environmentName')]" })],
  [
    'the workspace is tagged with something else',
    'tags',
    editResource(MONITORING, 'workspace', (r) => set(r, 'tags', "[createObject('azd-env-name', parameters('workspaceName'))]")),
  ],
  [
    'the service tag is computed',
    'tags',
    editResource(FUNCTION_APP, 'app', (r) =>
      replaceAt(r, 'tags', "'azd-service-name', 'baton'", "'azd-service-name', parameters('name')"),
    ),
  ],

  // Scope and modules.
  ['a module has no scope', 'target-scope', edit(MAIN_BICEP, (t) => remove(resourceOf(t, 'identity'), 'resourceGroup'))],
  [
    'deployed at management-group scope',
    'target-scope',
    edit(MAIN_BICEP, (t) =>
      replaceAt(t, '$schema', 'subscriptionDeploymentTemplate.json#', 'managementGroupDeploymentTemplate.json#'),
    ),
  ],
  [
    'the alerts are never deployed',
    'modules',
    edit(MAIN_BICEP, (t) => {
      t.resources = (t.resources as Json[]).filter((r) => r.name !== 'alerts');
    }),
  ],

  // Anonymous access.
  [
    'an anonymous function',
    'no-anonymous',
    edit(FUNCTION_APP, (t) =>
      set(
        t,
        'resources.open',
        {
          type: 'Microsoft.Web/sites/functions',
          apiVersion: '2025-03-01',
          name: "[format('{0}/{1}', parameters('name'), 'open')]",
          properties: { config: { bindings: [{ type: 'httpTrigger', authLevel: 'anonymous' }] } },
        },
        { create: true },
      ),
    ),
  ],
  [
    'App Service authentication lets anyone in',
    'no-anonymous',
    edit(FUNCTION_APP, (t) =>
      set(
        t,
        'resources.auth',
        {
          type: 'Microsoft.Web/sites/config',
          apiVersion: '2025-03-01',
          name: "[format('{0}/{1}', parameters('name'), 'authsettingsV2')]",
          properties: { globalValidation: { unauthenticatedClientAction: 'AllowAnonymous' } },
        },
        { create: true },
      ),
    ),
  ],

  // Alerts and workbook.
  [
    'an alert is missing',
    'alerts',
    editResource(ALERTS, 'runFailed', (r) =>
      replaceAt(criterion(r), 'query', 'name == "baton.run.ended"\n| extend', 'name == "baton.run.end"\n| extend'),
    ),
  ],
  [
    'a fourth alert',
    'alerts',
    edit(ALERTS, (t) => {
      const copy = structuredClone(resourceOf(t, 'fencingRefusals'));
      replaceAt(copy, 'name', "'baton-fencing-refusals-{0}'", "'baton-fencing-again-{0}'");
      set(t, 'resources.fencingAgain', copy, { create: true });
    }),
  ],
  [
    'skips and misses do not alert',
    'alerts',
    editResource(ALERTS, 'notRun', (r) =>
      replaceAt(criterion(r), 'query', 'name == "baton.schedule.not_run"', 'name == "baton.schedule.skipped"'),
    ),
  ],
  [
    'the start-lag alert on a fixed threshold',
    'alerts-condition',
    editResource(ALERTS, 'startLag', (r) => set(criterion(r), 'threshold', 60000)),
  ],
  [
    'the start-lag alert on the mean lag',
    'alerts-condition',
    editResource(ALERTS, 'startLag', (r) => set(criterion(r), 'timeAggregation', 'Average')),
  ],
  [
    'the start-lag alert reads the mean',
    'alerts-query',
    editResource(ALERTS, 'startLag', (r) => replaceAt(criterion(r), 'query', 'lag = valueMax', 'lag = value')),
  ],
  [
    'timeouts do not alert',
    'alerts-query',
    editResource(ALERTS, 'runFailed', (r) =>
      replaceAt(criterion(r), 'query', 'state in ("failed", "timed-out")', 'state in ("failed")'),
    ),
  ],
  [
    'no leader ignores the leader gauge',
    'alerts-query',
    editResource(ALERTS, 'noLeader', (r) =>
      replaceAt(
        criterion(r),
        'query',
        '| where name == "baton.leader.is_leader"\n    | summarize',
        '| where name == "baton.leader.held"\n    | summarize',
      ),
    ),
  ],
  [
    'no leader ignores acquisitions',
    'alerts-query',
    editResource(ALERTS, 'noLeader', (r) => replaceAt(criterion(r), 'query', '== "acquired"', '== "released"')),
  ],
  [
    'no leader ignores a resting lease',
    'alerts-query',
    editResource(ALERTS, 'noLeader', (r) =>
      replaceAt(criterion(r), 'query', '"baton.leader.resting_ticks"', '"baton.leader.rested"'),
    ),
  ],
  ['an alert on the resource group', 'alerts-scope', setIn(ALERTS, 'runFailed', 'properties.scopes', ['[resourceGroup().id]'])],
  [
    'an alert on the component and the group',
    'alerts-scope',
    editResource(ALERTS, 'notRun', (r) => r.properties.scopes.push('[resourceGroup().id]')),
  ],
  ['no leader over 15 minutes', 'alerts-window', setIn(ALERTS, 'noLeader', 'properties.windowSize', 'PT15M')],
  [
    'no leader counts transitions over an hour',
    'alerts-window',
    editResource(ALERTS, 'noLeader', (r) => replaceAt(criterion(r), 'query', 'ago(5m)', 'ago(1h)')),
  ],
  ['failed runs are looked at hourly', 'alerts-window', setIn(ALERTS, 'runFailed', 'properties.evaluationFrequency', 'PT1H')],
  ['failed runs between two windows are missed', 'alerts-window', setIn(ALERTS, 'runFailed', 'properties.windowSize', 'PT1M')],
  [
    'one fencing refusal is tolerated',
    'alerts-condition',
    editResource(ALERTS, 'fencingRefusals', (r) => set(criterion(r), 'threshold', 1)),
  ],
  [
    'fencing refusals are counted as rows',
    'alerts-condition',
    editResource(ALERTS, 'fencingRefusals', (r) => set(criterion(r), 'timeAggregation', 'Count')),
  ],
  [
    'an alert fires on silence',
    'alerts-condition',
    editResource(ALERTS, 'noLeader', (r) => set(criterion(r), 'operator', 'LessThan')),
  ],
  [
    'a fixed address is notified',
    'alerts-notify',
    setIn(ALERTS, 'actionGroup', 'properties.emailReceivers.0.emailAddress', 'ops@example.com'),
  ],
  ['an action group with no address', 'alerts-notify', editResource(ALERTS, 'actionGroup', (r) => remove(r, 'condition'))],
  ['an alert that tells nobody', 'alerts-notify', editResource(ALERTS, 'runFailed', (r) => remove(r, 'properties.actions'))],
  [
    'the workbook leaves out open runs',
    'workbook',
    edit(ALERTS, (t) => {
      const items = t.variables.workbookContent.items as string[];
      const index = items.findIndex((item) => typeof item === 'string' && item.includes('"baton.run.open"'));
      if (index < 0) throw new Error('no baton.run.open chart to break');
      items[index] = (items[index] as string).replace('"baton.run.open"', '"baton.runs.open"');
    }),
  ],
  [
    'the workbook belongs to the group',
    'workbook',
    editResource(ALERTS, 'workbook', (r) => set(r, 'properties.sourceId', '[toLower(resourceGroup().id)]')),
  ],
  ['no workbook', 'workbook', editResource(ALERTS, 'workbook', (r) => set(r, 'existing', true, { create: true }))],

  // App settings.
  ...['AzureWebJobsStorage__credential', 'AzureWebJobsStorage__clientId', 'AzureWebJobsStorage__accountName'].map(
    (name): [string, string, Mutate] => [`${name} is missing`, 'app-settings-identity', removeAppSetting(name)],
  ),
  // The per-service URI form fails on Flex Consumption (azure-functions-host#11787); the account name covers every service.
  ...['blobServiceUri', 'queueServiceUri', 'tableServiceUri'].map((uri): [string, string, Mutate] => [
    `the host connection uses __${uri}`,
    'app-settings-host-storage',
    addAppSetting(`AzureWebJobsStorage__${uri}`, "parameters('blobEndpoint')"),
  ]),
  [
    'the host signs in as another client',
    'app-settings-identity',
    setAppSetting('AzureWebJobsStorage__clientId', "parameters('appInsightsName')"),
  ],
  [
    'the credential is not the managed identity',
    'app-settings-credential',
    setAppSetting('AzureWebJobsStorage__credential', "'azurecli'"),
  ],
  [
    'AzureWebJobsStorage is a connection string',
    'app-settings-plain-connection',
    addAppSetting('AzureWebJobsStorage', "'UseDevelopmentStorage=true'"),
  ],
  [
    'AzureWebJobsStorage is set in the site config',
    'app-settings-plain-connection',
    editResource(FUNCTION_APP, 'app', (r) =>
      set(
        r,
        'properties.siteConfig.appSettings',
        [{ name: 'AzureWebJobsStorage', value: "[parameters('storageAccountName')]" }],
        { create: true },
      ),
    ),
  ],
  [
    'a run-from-package setting in the web config',
    'app-settings-flex-deprecated',
    edit(FUNCTION_APP, (t) =>
      set(
        t,
        'resources.web',
        {
          type: 'Microsoft.Web/sites/config',
          apiVersion: '2025-03-01',
          name: "[format('{0}/{1}', parameters('name'), 'web')]",
          properties: { appSettings: [{ name: 'WEBSITE_RUN_FROM_PACKAGE', value: '1' }] },
        },
        { create: true },
      ),
    ),
  ],
  ['FUNCTIONS_WORKER_RUNTIME on Flex', 'app-settings-flex-deprecated', addAppSetting('FUNCTIONS_WORKER_RUNTIME', "'node'")],
  ['WEBSITE_RUN_FROM_PACKAGE on Flex', 'app-settings-flex-deprecated', addAppSetting('WEBSITE_RUN_FROM_PACKAGE', "'1'")],
  ['BATON_HUB is not set', 'app-settings-baton', removeAppSetting('BATON_HUB')],
  ['BATON_LEASE_SECONDS is not set', 'app-settings-baton', removeAppSetting('BATON_LEASE_SECONDS')],
  ['BATON_SYNTHETIC_JOBS is not set', 'app-settings-baton', removeAppSetting('BATON_SYNTHETIC_JOBS')],
  ['a misspelt BATON_ setting', 'app-settings-baton', addAppSetting('BATON_LEASE_SECOND', "'15'")],
  [
    'a setting whose name is computed',
    'app-settings-baton',
    editAppSettings((args) => args.push(parseArmString("[format('BATON_{0}', parameters('hubName'))]"), parseArmString("'x'"))),
  ],

  // Every BATON_* setting, from azd env set to the app setting.
  [
    'BATON_TERM_SECONDS has no parameter',
    'baton-settings-param',
    edit(MAIN_BICEP, (t) => remove(t, 'parameters.termSeconds.metadata')),
  ],
  ['another default term', 'baton-settings-param', setIn(MAIN_BICEP, undefined, 'parameters.termSeconds.defaultValue', 30)],
  [
    'another default in-flight window',
    'baton-settings-param',
    setIn(MAIN_BICEP, undefined, 'parameters.maxInFlight.defaultValue', 256),
  ],
  [
    'a fixed renew deadline',
    'baton-settings-param',
    setIn(MAIN_BICEP, undefined, 'parameters.renewDeadlineSeconds.defaultValue', '10'),
  ],
  [
    'the durable engine by default',
    'baton-settings-param',
    setIn(MAIN_BICEP, undefined, 'parameters.engine.defaultValue', 'durable'),
  ],
  [
    'idle leaders hold their term by default',
    'baton-settings-param',
    setIn(MAIN_BICEP, undefined, 'parameters.restWhenIdle.defaultValue', false),
  ],
  [
    'BATON_TERM_SECONDS cannot be set with azd',
    'baton-settings-azd',
    editJson(PARAMETERS, (doc) => delete doc.parameters.termSeconds),
  ],
  [
    'BATON_ENGINE is read from another azd variable',
    'baton-settings-azd',
    editJson(PARAMETERS, (doc) => (doc.parameters.engine.value = '${ENGINE}')),
  ],
  [
    'main.bicep passes a fixed term',
    'baton-settings-wiring',
    edit(MAIN_BICEP, (t) => set(appParams(t), 'termSeconds.value', 60)),
  ],
  [
    'main.bicep passes another parameter',
    'baton-settings-wiring',
    edit(MAIN_BICEP, (t) => set(appParams(t), 'maxInFlight.value', "[parameters('maxAttempts')]")),
  ],
  ['the app setting ignores its parameter', 'baton-settings-wiring', setAppSetting('BATON_ENGINE', "'queue'")],
  [
    'the host retries a different number of times',
    'app-settings-max-dequeue',
    setAppSetting('AzureFunctionsJobHost__extensions__queues__maxDequeueCount', "'5'"),
  ],
  [
    "the host's retries are not set",
    'app-settings-max-dequeue',
    removeAppSetting('AzureFunctionsJobHost__extensions__queues__maxDequeueCount'),
  ],
  [
    "functions' debug lines always pass",
    'app-settings-debug-log',
    edit(FUNCTION_APP, (t) =>
      replaceAt(
        t,
        'variables.debugLogSettings',
        "equals(parameters('logLevel'), 'debug')",
        "not(equals(parameters('logLevel'), ''))",
      ),
    ),
  ],
  [
    "functions' debug lines never pass",
    'app-settings-debug-log',
    editResource(FUNCTION_APP, 'appSettings', (r) =>
      replaceAt(r, 'properties', "variables('debugLogSettings')", 'createObject()'),
    ),
  ],
  [
    "functions' debug lines pass unconditionally too",
    'app-settings-debug-log',
    addAppSetting('AzureFunctionsJobHost__logging__logLevel__Function', "'Debug'"),
  ],
  [
    'Application Insights accepts keys',
    'app-insights-entra',
    setIn(MONITORING, 'appInsights', 'properties.DisableLocalAuth', false),
  ],
  [
    'telemetry is not Entra-authenticated',
    'app-insights-entra',
    setAppSetting('APPLICATIONINSIGHTS_AUTHENTICATION_STRING', "format('ClientId={0}', parameters('identityClientId'))"),
  ],
  [
    'telemetry signs in as another client',
    'app-insights-entra',
    setAppSetting(
      'APPLICATIONINSIGHTS_AUTHENTICATION_STRING',
      "format('ClientId={0};Authorization=AAD', parameters('appInsightsName'))",
    ),
  ],
  ['no connection string for telemetry', 'app-insights-entra', removeAppSetting('APPLICATIONINSIGHTS_CONNECTION_STRING')],
  [
    'the identity cannot publish telemetry',
    'app-insights-entra',
    setIn(MONITORING, undefined, 'variables.monitoringMetricsPublisher', OTHER_GUID),
  ],
  [
    'the legacy instrumentation key',
    'app-insights-entra',
    addAppSetting('APPINSIGHTS_INSTRUMENTATIONKEY', "reference('appInsights').InstrumentationKey"),
  ],

  // Outputs.
  [
    'an output named like a key',
    'outputs-secret',
    edit(MAIN_BICEP, (t) =>
      set(t, 'outputs.STORAGE_KEY', { type: 'string', value: "[variables('storageAccountName')]" }, { create: true }),
    ),
  ],
  [
    'an output holding the connection string',
    'outputs-secret',
    edit(MONITORING, (t) =>
      set(t, 'outputs.telemetry', { type: 'string', value: "[reference('appInsights').ConnectionString]" }, { create: true }),
    ),
  ],
  [
    'an output named like a password',
    'outputs-secret',
    edit(MAIN_BICEP, (t) =>
      set(t, 'outputs.ADMIN_PASSWORD', { type: 'string', value: "[parameters('environmentName')]" }, { create: true }),
    ),
  ],
  [
    'an output holding a secret',
    'outputs-secret',
    edit(MAIN_BICEP, (t) =>
      set(
        t,
        'outputs.ID',
        {
          type: 'string',
          value:
            "[reference(resourceId('Microsoft.Resources/deployments', 'monitoring'), '2025-04-01').outputs.secretValue.value]",
        },
        { create: true },
      ),
    ),
  ],
  [
    'a secure output',
    'outputs-secret',
    edit(IDENTITY, (t) => set(t, 'outputs.token', { type: 'securestring', value: "[parameters('name')]" }, { create: true })),
  ],

  // Parameters of main.bicep.
  ['a hub longer than a queue name allows', 'params', setIn(MAIN_BICEP, undefined, 'parameters.hubName.maxLength', 63)],
  ['an empty hub', 'params', edit(MAIN_BICEP, (t) => remove(t, 'parameters.hubName.minLength'))],
  ['the hub is undocumented', 'params', edit(MAIN_BICEP, (t) => remove(t, 'parameters.hubName.metadata'))],
  ['another default hub', 'params', setIn(MAIN_BICEP, undefined, 'parameters.hubName.defaultValue', 'jobs')],
  ['a lease longer than blob leases allow', 'params', setIn(MAIN_BICEP, undefined, 'parameters.leaseSeconds.maxValue', 120)],
  ['a lease shorter than blob leases allow', 'params', setIn(MAIN_BICEP, undefined, 'parameters.leaseSeconds.minValue', 5)],
  ['another default lease', 'params', setIn(MAIN_BICEP, undefined, 'parameters.leaseSeconds.defaultValue', 30)],
  ['zero instances', 'params', setIn(MAIN_BICEP, undefined, 'parameters.maximumInstanceCount.minValue', 0)],
  ['more instances than Flex allows', 'params', setIn(MAIN_BICEP, undefined, 'parameters.maximumInstanceCount.maxValue', 2000)],
  ['another default instance limit', 'params', setIn(MAIN_BICEP, undefined, 'parameters.maximumInstanceCount.defaultValue', 100)],
  [
    'another default schedule',
    'params',
    setIn(MAIN_BICEP, undefined, 'parameters.coordinatorSchedule.defaultValue', '0 * * * * *'),
  ],
  ['no location parameter', 'params', edit(MAIN_BICEP, (t) => remove(t, 'parameters.location'))],

  // main.parameters.json.
  ['the parameters file is not JSON', 'params-file', (files) => ({ ...files, parametersJson: '{' })],
  [
    'the parameters file has another schema',
    'params-file',
    editJson(PARAMETERS, (doc) => (doc.$schema = 'https://example.com/x.json#')),
  ],
  ['a fixed environment name', 'params-file-azd', editJson(PARAMETERS, (doc) => (doc.parameters.environmentName.value = 'dev'))],
  ['a fixed location', 'params-file-azd', editJson(PARAMETERS, (doc) => (doc.parameters.location.value = 'westeurope'))],
  [
    'a value built from a variable',
    'params-file-azd',
    editJson(PARAMETERS, (doc) => (doc.parameters.hubName.value = '${BATON_HUB}-x')),
  ],
  [
    'a parameter main.bicep does not have',
    'params-file-unknown',
    editJson(PARAMETERS, (doc) => (doc.parameters.vnetEnabled = { value: true })),
  ],
  [
    'a required parameter without a value',
    'params-file-required',
    edit(MAIN_BICEP, (t) => set(t, 'parameters.adminGroup', { type: 'string' }, { create: true })),
  ],

  // host.json.
  ['host.json is not JSON', 'host-json', (files) => ({ ...files, hostJson: 'version: 2.0' })],
  ['host.json version 1', 'host-version', editJson('host.json', (doc) => (doc.version = '1.0'))],
  [
    'another extension bundle',
    'host-bundle',
    editJson('host.json', (doc) => (doc.extensionBundle.id = 'Microsoft.Azure.Functions.ExtensionBundle.Workflows')),
  ],
  ['extension bundle 3', 'host-bundle', editJson('host.json', (doc) => (doc.extensionBundle.version = '[3.*, 4.0.0)'))],
  [
    'base64 queue messages',
    'host-queues-encoding',
    editJson('host.json', (doc) => (doc.extensions.queues.messageEncoding = 'base64')),
  ],
  [
    'more deliveries than BATON_MAX_ATTEMPTS',
    'host-max-dequeue',
    editJson('host.json', (doc) => (doc.extensions.queues.maxDequeueCount = 6)),
  ],
  ['a fixed task hub', 'host-durable-hub', editJson('host.json', (doc) => (doc.extensions.durableTask.hubName = 'baton'))],
  [
    "Baton's console lines are dropped",
    'host-log-level',
    editJson('host.json', (doc) => {
      doc.logging.logLevel = { default: 'Warning', Function: 'Information' };
    }),
  ],
  [
    'the host category drops them',
    'host-log-level',
    editJson('host.json', (doc) => {
      delete doc.logging.logLevel['Host.Function.Console'];
      doc.logging.logLevel.Host = 'Warning';
    }),
  ],
  [
    "every function's debug lines by default",
    'host-log-level',
    editJson('host.json', (doc) => (doc.logging.logLevel.Function = 'Debug')),
  ],
  [
    'custom events are sampled',
    'host-sampling',
    editJson('host.json', (doc) => (doc.logging.applicationInsights.samplingSettings.excludedTypes = 'Request')),
  ],

  // azure.yaml.
  ['no schema line', 'yaml-schema', replace('azure.yaml', /^# yaml-language-server[^\n]*\n/, '')],
  ['a list where a map belongs', 'yaml-syntax', replace('azure.yaml', 'services:\n', 'services:\n  - baton\n')],
  ['no project name', 'yaml-name', replace('azure.yaml', /\nname: baton\n/, '\n')],
  ['two services', 'yaml-services', append('azure.yaml', '  api:\n    project: ./api\n    host: function')],
  ['the service is not the tagged app', 'yaml-service-tag', replace('azure.yaml', '\n  baton:\n', '\n  api:\n')],
  ['JavaScript', 'yaml-service', replace('azure.yaml', 'language: ts', 'language: js')],
  ['App Service', 'yaml-service', replace('azure.yaml', 'host: function', 'host: appservice')],
  ['another project folder', 'yaml-service', replace('azure.yaml', 'project: .', 'project: ./src')],
  ['the whole repository is zipped', 'yaml-package', replace('azure.yaml', 'dist: dist/deploy', 'dist: dist')],
  ['a remote build', 'yaml-package', replace('azure.yaml', 'remoteBuild: false', 'remoteBuild: true')],
  [
    'the hook script is not there',
    'yaml-hook',
    replace('azure.yaml', 'run: node infra/hooks/stage-package.mjs', 'run: node infra/hooks/stage.mjs'),
  ],
  ['the POSIX hook runs in PowerShell', 'yaml-hook', replace('azure.yaml', 'shell: sh', 'shell: pwsh')],
  [
    'the site update strategy is never set',
    'yaml-hook',
    replace('azure.yaml', 'run: node infra/hooks/site-update-strategy.mjs', 'run: node infra/hooks/strategy.mjs'),
  ],
];

describe('the deployment files', () => {
  beforeAll(async () => {
    real = await readInfraFiles(root);
  });

  it('pass every rule', () => {
    expect(lintInfra(real, expectations)).toEqual([]);
  });

  it('name every module by the Bicep file it was compiled from', () => {
    expect(Object.keys(real.hashes).sort()).toEqual(Object.keys(real.bicep).sort());
  });

  it('name the one service azd deploys in both azure.yaml and the function app tag', () => {
    const yaml = parseSimpleYaml(real.azureYaml) as { services: Record<string, unknown> };
    expect(Object.keys(yaml.services)).toEqual([serviceTagOf(real)]);
  });

  it.each(breakages)('fail when %s (%s)', (_what, rule, mutate) => {
    const broken = mutate(real);
    expect(broken).not.toEqual(real);
    const problems = lintInfra(broken, expectations);
    expect(problems.map(ruleOf)).toContain(rule);
  });

  it('know the default of every setting Baton reads, and of no other', () => {
    expect(settingNames.filter((name) => !(name in SETTING_DEFAULTS))).toEqual([]);
    expect(Object.keys(SETTING_DEFAULTS).filter((name) => !settingNames.includes(name))).toEqual([]);
  });

  it('has a broken copy for every rule the lint can report', () => {
    const source = readFileSync(join(root, 'test', 'support', 'infra-lint.ts'), 'utf8');
    const rules = new Set([...source.matchAll(/report\(\s*'([a-z0-9-]+)'/g)].map((m) => m[1]));
    expect(rules.size).toBeGreaterThan(40);
    const covered = new Set(breakages.map(([, rule]) => rule));
    expect([...rules].filter((rule) => !covered.has(rule as string))).toEqual([]);
  });

  it('allow a role scoped below the storage account', () => {
    const narrower = editResource(STORAGE_ACCESS, 'storageBlobDataOwner', (r) =>
      set(
        r,
        'scope',
        "[resourceId('Microsoft.Storage/storageAccounts/blobServices/containers', parameters('storageAccountName'), 'default', parameters('deploymentContainerName'))]",
      ),
    )(real);
    expect(lintInfra(narrower, expectations)).toEqual([]);
  });

  it('allow app settings set only on a condition, when they are not one Baton needs', () => {
    const conditional = editResource(FUNCTION_APP, 'appSettings', (r) =>
      replaceAt(
        r,
        'properties',
        "variables('debugLogSettings'))",
        "variables('debugLogSettings'), if(equals(parameters('engine'), 'durable'), createObject('AzureFunctionsJobHost__extensions__durableTask__storageProvider__partitionCount', '4'), createObject()))",
      ),
    )(real);
    expect(lintInfra(conditional, expectations)).toEqual([]);
  });

  it('read comments only for keys and strong roles, which may not appear even there', () => {
    const commented = append(FUNCTION_APP, "// FUNCTIONS_WORKER_RUNTIME: 'node' is set by Flex itself")(real);
    expect(lintInfra(commented, expectations)).toEqual([]);
    const keyInComment = append(FUNCTION_APP, '// never: storage.listKeys()')(real);
    expect(lintInfra(keyInComment, expectations).map(ruleOf)).toContain('no-list-keys');
  });

  it('require the package entry point inside the staged package', () => {
    const problems = lintAzureYaml(real.azureYaml, serviceTagOf(real), { ...expectations, packageMain: 'lib/index.js' });
    expect(problems.map(ruleOf)).toEqual(['yaml-package']);
  });
});

describe('the deploy hook (infra/hooks/stage-package.mjs)', () => {
  const temps: string[] = [];
  afterEach(() => {
    for (const dir of temps.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  /** A project like this one, with an npm that writes what the real commands would. */
  function fakeProject(options: { buildWrites?: string[] } = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'baton-stage-'));
    temps.push(dir);
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({
        name: 'baton-functions',
        version: '1.2.3',
        main: 'dist/src/index.js',
        dependencies: { zod: '^4.0.0' },
        devDependencies: {
          '@azure/functions': '4.16.5',
          '@azure/monitor-opentelemetry': '1.18.1',
          'durable-functions': '3.5.0',
          vitest: '4.1.12',
        },
        peerDependencies: {
          '@azure/functions': '^4.16.0',
          '@azure/monitor-opentelemetry': '^1.18.1',
          'durable-functions': '^3.5.0',
        },
      }),
    );
    writeFileSync(join(dir, 'package-lock.json'), '{}');
    mkdirSync(join(dir, 'functions'), { recursive: true });
    writeFileSync(join(dir, 'functions', 'host.json'), '{"version":"2.0"}');
    mkdirSync(join(dir, STAGE_DIR), { recursive: true });
    writeFileSync(join(dir, STAGE_DIR, 'stale.js'), 'from an earlier deploy');
    mkdirSync(join(dir, 'node_modules', 'vitest'), { recursive: true });
    const calls: { cwd: string; args: readonly string[] }[] = [];
    const npm = (cwd: string, args: readonly string[]) => {
      calls.push({ cwd: relative(dir, cwd).split(sep).join('/') || '.', args });
      if (args.join(' ') === 'run clean') rmSync(join(cwd, 'dist'), { recursive: true, force: true });
      if (args.join(' ') === 'run build') {
        for (const file of options.buildWrites ?? ['dist/src/index.js', 'dist/functions/index.js', 'dist/functions/index.d.ts']) {
          mkdirSync(dirname(join(cwd, file)), { recursive: true });
          writeFileSync(join(cwd, file), '// compiled');
        }
      }
      if (args[0] === 'install') {
        mkdirSync(join(cwd, 'node_modules', 'zod'), { recursive: true });
        writeFileSync(join(cwd, 'node_modules', 'zod', 'index.js'), '');
      }
    };
    return { dir, calls, npm };
  }

  function filesUnder(dir: string): string[] {
    return readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => relative(dir, join(entry.parentPath, entry.name)).split(sep).join('/'))
      .sort();
  }

  it('builds clean, stages only what the host loads, then installs production dependencies into the stage', () => {
    const { dir, calls, npm } = fakeProject();
    const out = stagePackage(dir, { npm, log: () => undefined });
    expect(out).toBe(join(dir, STAGE_DIR));
    expect(calls).toEqual([
      { cwd: '.', args: ['run', 'clean'] },
      { cwd: '.', args: ['run', 'build'] },
      { cwd: STAGE_DIR, args: INSTALL_ARGS },
    ]);
    expect(filesUnder(out)).toEqual([
      '.funcignore',
      'dist/functions/index.d.ts',
      'dist/functions/index.js',
      'dist/src/index.js',
      'host.json',
      'node_modules/zod/index.js',
      'package-lock.json',
      'package.json',
    ]);
    expect(existsSync(join(out, APP_MAIN))).toBe(true);
    // The app's manifest: the library's dependencies and the peers an app brings, as tested.
    expect(JSON.parse(readFileSync(join(out, 'package.json'), 'utf8'))).toEqual({
      name: 'baton-functions',
      version: '1.2.3',
      private: true,
      main: APP_MAIN,
      dependencies: {
        zod: '^4.0.0',
        '@azure/functions': '4.16.5',
        'durable-functions': '3.5.0',
        '@azure/monitor-opentelemetry': '1.18.1',
      },
    });
  });

  it('refuses to stage an app without a tested version of a peer it needs', () => {
    expect(() => appManifest({ name: 'x', version: '1.0.0', dependencies: {} })).toThrow(
      /the app needs @azure\/functions, and package.json devDependencies has no tested version of it/,
    );
  });

  it('fails, naming the path, when the build did not produce it', () => {
    const { dir, npm } = fakeProject({ buildWrites: ['dist/functions/index.js'] });
    expect(() => stagePackage(dir, { npm, log: () => undefined })).toThrow(/dist\/src is missing/);
  });

  it('installs exactly the locked production dependencies, without their scripts', () => {
    expect(INSTALL_ARGS[0]).toBe('install');
    expect(INSTALL_ARGS).toEqual(expect.arrayContaining(['--omit=dev', '--omit=optional', '--ignore-scripts']));
    expect(PACKAGE_FILES['package-lock.json']).toBe('package-lock.json');
    // What the real package.json gives the app: every peer it needs, at an exact tested version.
    const manifest = appManifest(pkg as unknown as Parameters<typeof appManifest>[0]);
    for (const name of APP_PEERS) expect(manifest.dependencies[name], name).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('stages the compiled app and every library module it loads, where git and azure.yaml expect', () => {
    // The reference app loads the library compiled by tsc (dist/src), not the package's bundle.
    expect(Object.values(PACKAGE_FILES)).toEqual(expect.arrayContaining(['dist/src', 'dist/functions', 'package-lock.json']));
    const appDir = join(root, 'dist', 'functions');
    for (const file of readdirSync(appDir).filter((name) => name.endsWith('.js'))) {
      for (const [, target] of readFileSync(join(appDir, file), 'utf8').matchAll(/require\("(\.[^"]+)"\)/g)) {
        const staged = relative(root, resolve(appDir, target!));
        expect(
          Object.values(PACKAGE_FILES).some((dir) => staged.startsWith(`${dir}/`)),
          `${file} loads ${staged}`,
        ).toBe(true);
      }
    }
    // The app's host.json, at the root of the stage where the host reads it; its entry, as the
    // reference app's own package.json names it.
    expect(PACKAGE_FILES['host.json']).toBe('functions/host.json');
    const app = JSON.parse(readFileSync(join(root, 'functions', 'package.json'), 'utf8')) as { main: string };
    expect(join('functions', app.main)).toBe(APP_MAIN);
    expect(STAGE_DIR.startsWith('dist/')).toBe(true);
    expect(readFileSync(join(root, '.gitignore'), 'utf8').split(/\r?\n/)).toContain('dist/');
  });

  it('keeps node_modules in the zip whatever azd would leave out by default', () => {
    const patterns = FUNCIGNORE.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
    expect(patterns.length).toBeGreaterThan(0);
    for (const pattern of patterns) expect(pattern).not.toMatch(/node_modules/);
  });
});
