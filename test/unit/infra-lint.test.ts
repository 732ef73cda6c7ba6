import { DEFAULT_AUDIT_CONTAINER } from '../../functions/jobs';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  APP_PEERS,
  FUNCIGNORE,
  INSTALL_ARGS,
  APP_MAIN,
  PACKAGE_FILES,
  STAGE_DIR,
  appManifest,
  stagePackage,
} from '../../infra/hooks/stage-package.mjs';
import { hubResources } from '../../src/hub/resources';
import { parseBatonSettings, parseLogLevel } from '../../src/app/settings';
import {
  MAIN_BICEP,
  ROLE,
  lintAzureYaml,
  lintInfra,
  parseSimpleYaml,
  readInfraFiles,
  ruleOf,
  serviceTagOf,
  type InfraExpectations,
  type InfraFiles,
} from '../support/infra-lint';

// The Bicep compiler and Azure are out of reach here, so the deployment files are checked as
// text: the real files must pass every rule, and for every rule a copy broken on purpose must
// fail it, which shows the rule can fail at all.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { main: string; files: string[] };
const defaults = parseBatonSettings({});
const resources = hubResources('hub');

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

/** Each setting's default as its Bicep parameter must write it; '' where Baton's default is "unset". */
const SETTING_DEFAULTS: Record<string, string> = {
  BATON_HUB: `'${defaults.hub}'`,
  BATON_LEASE_SECONDS: String(defaults.leaseDurationSeconds),
  // Two thirds of the lease, which Baton works out when the setting is blank.
  BATON_RENEW_DEADLINE_SECONDS: "''",
  BATON_LEASE_CONTAINER: `'${defaults.leaseContainer}'`,
  BATON_COORDINATOR_SCHEDULE: `'${defaults.coordinatorSchedule}'`,
  BATON_TERM_SECONDS: String(defaults.termSeconds),
  BATON_REST_WHEN_IDLE: String(defaults.restWhenIdle),
  BATON_MAX_ATTEMPTS: String(defaults.maxAttempts),
  BATON_MAX_IN_FLIGHT: String(defaults.maxInFlightMessages),
  BATON_LOG_LEVEL: `'${parseLogLevel({})}'`,
  BATON_QUEUE_SHARDS: String(defaults.queueShards),
  BATON_RETENTION_DAYS: String(defaults.retention.runDays),
  // As long as the run, which Baton works out when the setting is blank.
  BATON_OUTPUT_RETENTION_DAYS: "''",
  BATON_ENGINE: `'${defaults.engine}'`,
  BATON_METRICS_EXPORTER: "'none'",
  // The reference app runs its sample unless told not to; a deploy leaves it out unless asked.
  BATON_SAMPLE_JOB: 'false',
  BATON_AUDIT_CONTAINER: `'${DEFAULT_AUDIT_CONTAINER}'`,
  BATON_SYNTHETIC_JOBS: "''",
  // The package's version, which Baton reads when the setting is blank.
  BATON_APP_VERSION: "''",
  BATON_LEADER_PRIORITY: String(defaults.leaderPriority),
  BATON_HTTP_AUTH: `'${defaults.httpAuth}'`,
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
  maximumInstanceCount: 40,
  packageMain: APP_MAIN,
  stagedPaths: Object.keys(PACKAGE_FILES),
  stageDir: STAGE_DIR,
  exists: (path) => existsSync(join(root, path)),
  batonSettings: Object.fromEntries(
    settingNames.map((name) => [name, SETTING_DEFAULTS[name] ?? `(no default known for ${name})`]),
  ),
};

const real = readInfraFiles(root);

const FUNCTION_APP = 'infra/modules/function-app.bicep';
const STORAGE = 'infra/modules/storage.bicep';
const STORAGE_ACCESS = 'infra/modules/storage-access.bicep';
const MONITORING = 'infra/modules/monitoring.bicep';
const IDENTITY = 'infra/modules/identity.bicep';
const ALERTS = 'infra/modules/alerts.bicep';
const PARAMETERS = 'infra/main.parameters.json';
const OTHER_GUID = '00000000-0000-0000-0000-000000000001';

type FileName = string;
type Mutate = (files: InfraFiles) => InfraFiles;

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

function addAppSetting(line: string): Mutate {
  return replace(
    FUNCTION_APP,
    "AzureWebJobsStorage__credential: 'managedidentity'",
    `AzureWebJobsStorage__credential: 'managedidentity'\n    ${line}`,
  );
}

function editJson(file: FileName, edit: (doc: Record<string, any>) => void): Mutate {
  return (files) => {
    const doc = JSON.parse(textOf(files, file)) as Record<string, any>;
    edit(doc);
    return withText(files, file, JSON.stringify(doc, null, 2));
  };
}

const withoutMain: Mutate = (files) => {
  const bicep = { ...files.bicep };
  delete bicep[MAIN_BICEP];
  return { ...files, bicep };
};

/** [what breaks, the rule that must catch it, the breakage]. */
const breakages: [string, string, Mutate][] = [
  ['main.bicep is gone', 'files', withoutMain],

  // Keys and secrets, in any form.
  [
    'the account key is read with listKeys()',
    'no-list-keys',
    append(STORAGE, 'var accountKey = storage.listKeys().keys[0].value'),
  ],
  [
    'an account SAS is minted',
    'no-list-keys',
    append(STORAGE, "var sas = storage.listAccountSas('2023-05-01', {}).accountSasToken"),
  ],
  [
    'an app setting holds an AccountKey connection string',
    'no-key-material',
    addAppSetting("LEGACY: 'AccountName=x;AccountKey=abc'"),
  ],
  [
    'an app setting holds a SAS URL',
    'no-key-material',
    addAppSetting("PACKAGE_URL: 'https://x.blob.core.windows.net/c/p.zip?sv=2022-11-02&sig=abc'"),
  ],
  [
    'an app setting holds a SharedAccessSignature',
    'no-key-material',
    addAppSetting("LEGACY: 'BlobEndpoint=https://x;SharedAccessSignature=sv=1'"),
  ],
  [
    'an app setting holds a connection string',
    'no-key-material',
    addAppSetting("LEGACY: 'DefaultEndpointsProtocol=https;AccountName=x'"),
  ],

  // The storage account.
  [
    'shared keys are allowed',
    'storage-shared-key',
    replace(STORAGE, 'allowSharedKeyAccess: false', 'allowSharedKeyAccess: true'),
  ],
  [
    'shared-key access comes from a variable',
    'storage-shared-key',
    replace(STORAGE, 'allowSharedKeyAccess: false', 'allowSharedKeyAccess: allowKeys'),
  ],
  ['TLS 1.0 is accepted', 'storage-tls', replace(STORAGE, "minimumTlsVersion: 'TLS1_2'", "minimumTlsVersion: 'TLS1_0'")],
  ['blobs may be public', 'storage-public-blob', replace(STORAGE, 'allowBlobPublicAccess: false', 'allowBlobPublicAccess: true')],
  [
    'plain HTTP is accepted',
    'storage-https-only',
    replace(STORAGE, 'supportsHttpsTrafficOnly: true', 'supportsHttpsTrafficOnly: false'),
  ],
  [
    'the portal defaults to keys',
    'storage-oauth-default',
    replace(STORAGE, 'defaultToOAuthAuthentication: true', 'defaultToOAuthAuthentication: false'),
  ],
  [
    'no storage account is created',
    'storage-account',
    replace(
      STORAGE,
      "resource storage 'Microsoft.Storage/storageAccounts@2025-06-01' = {",
      "resource storage 'Microsoft.Storage/storageAccounts@2025-06-01' existing = {",
    ),
  ],
  ['a container is public', 'container-public-access', replace(STORAGE, "publicAccess: 'None'", "publicAccess: 'Blob'")],
  ['the poison queue is misnamed', 'hub-resources', replace(MAIN_BICEP, "'${hubName}-work-poison'", "'${hubName}-poison'")],
  ['the runs container is missing', 'hub-resources', replace(MAIN_BICEP, "'${hubName}-runs'", "'${hubName}-records'")],
  [
    "the lease container is not Baton's",
    'hub-resources',
    replace(MAIN_BICEP, "param leaseContainerName string = 'leases'", "param leaseContainerName string = 'locks'"),
  ],
  [
    "the audit container is not Baton's",
    'hub-resources',
    replace(MAIN_BICEP, "param auditContainerName string = 'audit-demo'", "param auditContainerName string = 'audit'"),
  ],

  // Roles.
  [
    'blob access is read-only',
    'role-blob-data',
    replace(STORAGE_ACCESS, ROLE.storageBlobDataOwner, '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'),
  ],
  [
    'queue access is read-only',
    'role-queue-data',
    replace(STORAGE_ACCESS, ROLE.storageQueueDataContributor, '19e7f393-937e-4f77-808e-94535e297925'),
  ],
  [
    'the identity is made Owner',
    'role-forbidden',
    replace(STORAGE_ACCESS, ROLE.storageBlobDataOwner, '8e3af657-a8ff-443c-a75c-2fe8c4bcb635'),
  ],
  [
    'the identity is made Contributor',
    'role-forbidden',
    replace(STORAGE_ACCESS, ROLE.storageBlobDataOwner, 'b24988ac-6180-42a0-ab88-20f7382dd24c'),
  ],
  [
    'the identity may list keys',
    'role-forbidden',
    replace(STORAGE_ACCESS, ROLE.storageQueueDataContributor, '17d1049b-9a84-46fb-8f53-869881c3d3ab'),
  ],
  ['a role is assigned on the subscription', 'role-scope', replace(STORAGE_ACCESS, 'scope: storage', 'scope: subscription()')],
  ['a role is assigned on the resource group', 'role-scope', replace(STORAGE_ACCESS, 'scope: storage', 'scope: resourceGroup()')],
  ['a role assignment has no scope', 'role-scope', replace(STORAGE_ACCESS, /\n\s*scope: storage/, '')],
  ['a role is assigned on the workspace', 'role-scope', replace(MONITORING, 'scope: appInsights', 'scope: workspace')],
  [
    'a role goes to a user',
    'role-principal-type',
    replace(STORAGE_ACCESS, "principalType: 'ServicePrincipal'", "principalType: 'User'"),
  ],
  [
    'the durable engine cannot reach its tables',
    'role-table-data',
    replace(
      STORAGE_ACCESS,
      "var storageTableDataContributor = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'",
      `var storageTableDataContributor = '${OTHER_GUID}'`,
    ),
  ],
  ['the queue engine gets table access too', 'role-table-data', replace(STORAGE_ACCESS, '= if (grantTableData) {', '= {')],
  [
    'table access does not follow the engine',
    'role-table-data',
    replace(MAIN_BICEP, "grantTableData: engine == 'durable'", 'grantTableData: true'),
  ],
  ['a role assignment has a fixed name', 'role-name-guid', replace(STORAGE_ACCESS, /name: guid\([^\n]*\)/, "name: 'blob-data'")],

  // The identity.
  ['the app runs as a system identity', 'identity', replace(FUNCTION_APP, "type: 'UserAssigned'", "type: 'SystemAssigned'")],
  [
    'no user-assigned identity is created',
    'identity',
    replace(IDENTITY, "userAssignedIdentities@2024-11-30' = {", "userAssignedIdentities@2024-11-30' existing = {"),
  ],

  // The function app.
  ['the plan is Consumption', 'flex-plan', replace(FUNCTION_APP, "name: 'FC1'", "name: 'Y1'")],
  ['the plan tier is Dynamic', 'flex-plan', replace(FUNCTION_APP, "tier: 'FlexConsumption'", "tier: 'Dynamic'")],
  ['the app is not a Linux function app', 'flex-site', replace(FUNCTION_APP, "kind: 'functionapp,linux'", "kind: 'functionapp'")],
  ['the app has no functionAppConfig', 'flex-site', replace(FUNCTION_APP, 'functionAppConfig: {', 'siteProperties: {')],
  ['Node 20', 'flex-runtime', replace(FUNCTION_APP, "version: '22'", "version: '20'")],
  ['Python', 'flex-runtime', replace(FUNCTION_APP, "name: 'node'", "name: 'python'")],
  ['4 GB instances', 'flex-scale', replace(FUNCTION_APP, 'instanceMemoryMB: 2048', 'instanceMemoryMB: 4096')],
  [
    'a fixed instance limit',
    'flex-scale',
    replace(FUNCTION_APP, 'maximumInstanceCount: maximumInstanceCount', 'maximumInstanceCount: 100'),
  ],
  [
    'the package is read with a connection string',
    'flex-deployment-identity',
    replace(FUNCTION_APP, "type: 'UserAssignedIdentity'", "type: 'StorageAccountConnectionString'"),
  ],
  ['HTTP is served', 'https-only', replace(FUNCTION_APP, 'httpsOnly: true', 'httpsOnly: false')],
  ['TLS 1.0 is served', 'site-tls', replace(FUNCTION_APP, "minTlsVersion: '1.2'", "minTlsVersion: '1.0'")],
  ['FTP credentials are on', 'basic-auth', replace(FUNCTION_APP, /(name: 'ftp'\s*properties: \{\s*allow: )false/, '$1true')],
  ['the SCM policy is missing', 'basic-auth', replace(FUNCTION_APP, "name: 'scm'", "name: 'scm-disabled'")],
  ['no azd-env-name tag', 'tags', replace(MAIN_BICEP, "'azd-env-name': environmentName", "'env': environmentName")],
  [
    'the service tag is computed',
    'tags',
    replace(FUNCTION_APP, "'azd-service-name': 'baton'", "'azd-service-name': serviceName"),
  ],

  // Scope and modules.
  ['a module has no scope', 'target-scope', replace(MAIN_BICEP, /(name: 'identity'\n)\s*scope: rg\n/, '$1')],
  [
    'deployed at management-group scope',
    'target-scope',
    replace(MAIN_BICEP, "targetScope = 'subscription'", "targetScope = 'managementGroup'"),
  ],
  ['a module file is missing', 'modules', replace(MAIN_BICEP, "'modules/identity.bicep'", "'modules/identities.bicep'")],
  ['the alerts are never deployed', 'modules', replace(MAIN_BICEP, /\nmodule alerts [\s\S]*?\n\}\n/, '\n')],

  // Anonymous access.
  [
    'an anonymous function',
    'no-anonymous',
    append(
      FUNCTION_APP,
      "resource open 'Microsoft.Web/sites/functions@2025-03-01' = {\n  parent: app\n  name: 'open'\n  properties: {\n    config: {\n      bindings: [\n        {\n          type: 'httpTrigger'\n          authLevel: 'anonymous'\n        }\n      ]\n    }\n  }\n}",
    ),
  ],
  [
    'App Service authentication lets anyone in',
    'no-anonymous',
    append(
      FUNCTION_APP,
      "resource auth 'Microsoft.Web/sites/config@2025-03-01' = {\n  parent: app\n  name: 'authsettingsV2'\n  properties: {\n    globalValidation: {\n      unauthenticatedClientAction: 'AllowAnonymous'\n    }\n  }\n}",
    ),
  ],

  // Alerts and workbook.
  ['an alert is missing', 'alerts', replace(ALERTS, 'name == "baton.run.ended"\n| extend', 'name == "baton.run.end"\n| extend')],
  [
    'a fourth alert',
    'alerts',
    (files) => {
      const text = textOf(files, ALERTS);
      const start = text.indexOf('resource fencingRefusals');
      const end = text.indexOf('\n}\n', start) + 3;
      return withText(
        files,
        ALERTS,
        `${text}\n${text.slice(start, end).replace('resource fencingRefusals', 'resource fencingAgain').replace("name: 'baton-fencing-refusals-", "name: 'baton-fencing-again-")}`,
      );
    },
  ],
  [
    'skips and misses do not alert',
    'alerts',
    replace(ALERTS, 'name == "baton.schedule.not_run"', 'name == "baton.schedule.skipped"'),
  ],
  [
    'the start-lag alert on a fixed threshold',
    'alerts-condition',
    replace(ALERTS, 'threshold: startLagAlertMs', 'threshold: 60000'),
  ],
  [
    'the start-lag alert on the mean lag',
    'alerts-condition',
    replace(ALERTS, "timeAggregation: 'Maximum'", "timeAggregation: 'Average'"),
  ],
  ['the start-lag alert reads the mean', 'alerts-query', replace(ALERTS, 'lag = valueMax', 'lag = value')],
  ['timeouts do not alert', 'alerts-query', replace(ALERTS, 'state in ("failed", "timed-out")', 'state in ("failed")')],
  [
    'no leader ignores the leader gauge',
    'alerts-query',
    replace(
      ALERTS,
      '| where name == "baton.leader.is_leader"\n    | summarize',
      '| where name == "baton.leader.held"\n    | summarize',
    ),
  ],
  ['no leader ignores acquisitions', 'alerts-query', replace(ALERTS, '== "acquired"', '== "released"')],
  [
    'an alert on the resource group',
    'alerts-scope',
    replace(ALERTS, /scopes: \[\n\s*appInsights\.id\n\s*\]/, 'scopes: [\n      resourceGroup().id\n    ]'),
  ],
  [
    'no leader over 15 minutes',
    'alerts-window',
    replace(ALERTS, /(displayName: 'Baton \$\{hubName\}: no leader[\s\S]*?windowSize: )'PT5M'/, "$1'PT15M'"),
  ],
  ['no leader counts transitions over an hour', 'alerts-window', replace(ALERTS, 'ago(5m)', 'ago(1h)')],
  [
    'failed runs are looked at hourly',
    'alerts-window',
    replace(ALERTS, /(a run failed or timed out'[\s\S]*?evaluationFrequency: )'PT5M'/, "$1'PT1H'"),
  ],
  [
    'failed runs between two windows are missed',
    'alerts-window',
    replace(ALERTS, /(a run failed or timed out'[\s\S]*?windowSize: )'PT10M'/, "$1'PT1M'"),
  ],
  [
    'one fencing refusal is tolerated',
    'alerts-condition',
    replace(ALERTS, /(metricMeasureColumn: 'refusals'\n\s*operator: 'GreaterThan'\n\s*threshold: )0/, '$11'),
  ],
  [
    'fencing refusals are counted as rows',
    'alerts-condition',
    replace(ALERTS, "timeAggregation: 'Total'", "timeAggregation: 'Count'"),
  ],
  [
    'an alert fires on silence',
    'alerts-condition',
    replace(ALERTS, /(print timestamp[\s\S]*?operator: )'GreaterThan'/, "$1'LessThan'"),
  ],
  [
    'a fixed address is notified',
    'alerts-notify',
    replace(ALERTS, 'emailAddress: alertEmail', "emailAddress: 'ops@example.com'"),
  ],
  [
    'an action group with no address',
    'alerts-notify',
    replace(ALERTS, "actionGroups@2023-01-01' = if (notify) {", "actionGroups@2023-01-01' = {"),
  ],
  ['an alert that tells nobody', 'alerts-notify', replace(ALERTS, /\n\s*actions: \{\n\s*actionGroups: actionGroups\n\s*\}/, '')],
  [
    'the workbook leaves out open runs',
    'workbook',
    replace(ALERTS, '| where name == "baton.run.open"', '| where name == "baton.runs.open"'),
  ],
  [
    'the workbook belongs to the group',
    'workbook',
    replace(ALERTS, 'sourceId: toLower(appInsights.id)', 'sourceId: toLower(resourceGroup().id)'),
  ],
  ['no workbook', 'workbook', replace(ALERTS, "workbooks@2023-06-01' = {", "workbooks@2023-06-01' existing = {")],

  // App settings.
  ...['AzureWebJobsStorage__credential', 'AzureWebJobsStorage__clientId', 'AzureWebJobsStorage__accountName'].map(
    (name): [string, string, Mutate] => [
      `${name} is missing`,
      'app-settings-identity',
      replace(FUNCTION_APP, new RegExp(`\\n\\s*${name}:[^\\n]*`), ''),
    ],
  ),
  // The per-service URI form fails on Flex Consumption (azure-functions-host#11787); the account name covers every service.
  ...['blobServiceUri', 'queueServiceUri', 'tableServiceUri'].map((uri): [string, string, Mutate] => [
    `the host connection uses __${uri}`,
    'app-settings-host-storage',
    addAppSetting(`AzureWebJobsStorage__${uri}: blobEndpoint`),
  ]),
  [
    'the credential is not the managed identity',
    'app-settings-credential',
    replace(FUNCTION_APP, "__credential: 'managedidentity'", "__credential: 'azurecli'"),
  ],
  [
    'AzureWebJobsStorage is a connection string',
    'app-settings-plain-connection',
    addAppSetting("AzureWebJobsStorage: 'UseDevelopmentStorage=true'"),
  ],
  ['AzureWebJobsStorage is set by name', 'app-settings-plain-connection', addAppSetting("'AzureWebJobsStorage': storageSetting")],
  ['FUNCTIONS_WORKER_RUNTIME on Flex', 'app-settings-flex-deprecated', addAppSetting("FUNCTIONS_WORKER_RUNTIME: 'node'")],
  ['WEBSITE_RUN_FROM_PACKAGE on Flex', 'app-settings-flex-deprecated', addAppSetting("WEBSITE_RUN_FROM_PACKAGE: '1'")],
  ['BATON_HUB is not set', 'app-settings-baton', replace(FUNCTION_APP, /\n\s*BATON_HUB:[^\n]*/, '')],
  ['BATON_LEASE_SECONDS is not set', 'app-settings-baton', replace(FUNCTION_APP, /\n\s*BATON_LEASE_SECONDS:[^\n]*/, '')],
  ['BATON_SYNTHETIC_JOBS is not set', 'app-settings-baton', replace(FUNCTION_APP, /\n\s*BATON_SYNTHETIC_JOBS:[^\n]*/, '')],
  ['a misspelt BATON_ setting', 'app-settings-baton', addAppSetting("BATON_LEASE_SECOND: '15'")],

  // Every BATON_* setting, from azd env set to the app setting.
  [
    'BATON_TERM_SECONDS has no parameter',
    'baton-settings-param',
    replace(MAIN_BICEP, /@description\('BATON_TERM_SECONDS:[^\n]*\n/, ''),
  ],
  [
    'another default term',
    'baton-settings-param',
    replace(MAIN_BICEP, 'param termSeconds int = 60', 'param termSeconds int = 30'),
  ],
  [
    'another default in-flight window',
    'baton-settings-param',
    replace(MAIN_BICEP, 'param maxInFlight int = 4096', 'param maxInFlight int = 256'),
  ],
  [
    'a fixed renew deadline',
    'baton-settings-param',
    replace(MAIN_BICEP, "param renewDeadlineSeconds string = ''", "param renewDeadlineSeconds string = '10'"),
  ],
  [
    'the durable engine by default',
    'baton-settings-param',
    replace(MAIN_BICEP, "param engine string = 'queue'", "param engine string = 'durable'"),
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
  ['main.bicep passes a fixed term', 'baton-settings-wiring', replace(MAIN_BICEP, 'termSeconds: termSeconds', 'termSeconds: 60')],
  [
    'the app setting ignores its parameter',
    'baton-settings-wiring',
    replace(FUNCTION_APP, 'BATON_ENGINE: engine', "BATON_ENGINE: 'queue'"),
  ],
  [
    'the host retries a different number of times',
    'app-settings-max-dequeue',
    replace(
      FUNCTION_APP,
      'AzureFunctionsJobHost__extensions__queues__maxDequeueCount: string(maxAttempts)',
      "AzureFunctionsJobHost__extensions__queues__maxDequeueCount: '5'",
    ),
  ],
  [
    "the host's retries are not set",
    'app-settings-max-dequeue',
    replace(FUNCTION_APP, /\n\s*AzureFunctionsJobHost__extensions__queues__maxDequeueCount:[^\n]*/, ''),
  ],
  [
    "functions' debug lines always pass",
    'app-settings-debug-log',
    replace(FUNCTION_APP, "logLevel == 'debug' ? {", "logLevel != '' ? {"),
  ],
  [
    "functions' debug lines never pass",
    'app-settings-debug-log',
    replace(
      FUNCTION_APP,
      '}, storageEndpointSettings, sampleSettings, debugLogSettings)',
      '}, storageEndpointSettings, sampleSettings, {})',
    ),
  ],
  [
    "functions' debug lines pass unconditionally too",
    'app-settings-debug-log',
    addAppSetting("AzureFunctionsJobHost__logging__logLevel__Function: 'Debug'"),
  ],
  [
    'Application Insights accepts keys',
    'app-insights-entra',
    replace(MONITORING, 'DisableLocalAuth: true', 'DisableLocalAuth: false'),
  ],
  ['telemetry is not Entra-authenticated', 'app-insights-entra', replace(FUNCTION_APP, ';Authorization=AAD', '')],
  [
    'no connection string for telemetry',
    'app-insights-entra',
    replace(FUNCTION_APP, /\n\s*APPLICATIONINSIGHTS_CONNECTION_STRING:[^\n]*/, ''),
  ],
  [
    'the identity cannot publish telemetry',
    'app-insights-entra',
    replace(MONITORING, ROLE.monitoringMetricsPublisher, OTHER_GUID),
  ],
  [
    'the legacy instrumentation key',
    'app-insights-entra',
    addAppSetting('APPINSIGHTS_INSTRUMENTATIONKEY: appInsights.properties.InstrumentationKey'),
  ],

  // Outputs.
  ['an output named like a key', 'outputs-secret', append(MAIN_BICEP, 'output STORAGE_KEY string = storageAccountName')],
  [
    'an output holding the connection string',
    'outputs-secret',
    append(MONITORING, 'output telemetry string = appInsights.properties.ConnectionString'),
  ],
  ['an output named like a password', 'outputs-secret', append(MAIN_BICEP, 'output ADMIN_PASSWORD string = environmentName')],
  ['an output holding a secret', 'outputs-secret', append(MAIN_BICEP, 'output ID string = monitoring.outputs.secretValue')],

  // Parameters of main.bicep.
  ['a hub longer than a queue name allows', 'params', replace(MAIN_BICEP, '@maxLength(51)', '@maxLength(63)')],
  ['an empty hub', 'params', replace(MAIN_BICEP, /@minLength\(1\)\n(@maxLength\(51\))/, '$1')],
  ['the hub is undocumented', 'params', replace(MAIN_BICEP, /@description\('BATON_HUB:[^\n]*\n/, '')],
  ['another default hub', 'params', replace(MAIN_BICEP, "param hubName string = 'baton'", "param hubName string = 'jobs'")],
  ['a lease longer than blob leases allow', 'params', replace(MAIN_BICEP, '@maxValue(60)', '@maxValue(120)')],
  ['a lease shorter than blob leases allow', 'params', replace(MAIN_BICEP, '@minValue(15)', '@minValue(5)')],
  ['another default lease', 'params', replace(MAIN_BICEP, 'param leaseSeconds int = 15', 'param leaseSeconds int = 30')],
  ['zero instances', 'params', replace(MAIN_BICEP, /@minValue\(1\)\n(@maxValue\(1000\))/, '@minValue(0)\n$1')],
  ['more instances than Flex allows', 'params', replace(MAIN_BICEP, '@maxValue(1000)', '@maxValue(2000)')],
  [
    'another default instance limit',
    'params',
    replace(MAIN_BICEP, 'param maximumInstanceCount int = 40', 'param maximumInstanceCount int = 100'),
  ],
  [
    'another default schedule',
    'params',
    replace(
      MAIN_BICEP,
      "param coordinatorSchedule string = '*/10 * * * * *'",
      "param coordinatorSchedule string = '0 * * * * *'",
    ),
  ],

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
  ['a required parameter without a value', 'params-file-required', append(MAIN_BICEP, 'param adminGroup string')],

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
];

describe('the deployment files', () => {
  it('pass every rule', () => {
    expect(lintInfra(real, expectations)).toEqual([]);
  });

  it('name the one service azd deploys in both azure.yaml and the function app tag', () => {
    const yaml = parseSimpleYaml(real.azureYaml) as { services: Record<string, unknown> };
    expect(Object.keys(yaml.services)).toEqual([serviceTagOf(real.bicep)]);
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
    const rules = new Set([...source.matchAll(/report\('([a-z0-9-]+)'/g)].map((m) => m[1]));
    const covered = new Set(breakages.map(([, rule]) => rule));
    expect([...rules].filter((rule) => !covered.has(rule as string))).toEqual([]);
  });

  it('allow a role scoped below the storage account', () => {
    const narrower = replace(STORAGE_ACCESS, 'scope: storage', 'scope: deploymentContainer')(real);
    expect(lintInfra(narrower, expectations)).toEqual([]);
  });

  it('ignore what comments say, except that keys and strong roles may not appear even there', () => {
    const commented = append(FUNCTION_APP, "// FUNCTIONS_WORKER_RUNTIME: 'node' is set by Flex itself")(real);
    expect(lintInfra(commented, expectations)).toEqual([]);
    const keyInComment = append(FUNCTION_APP, '// never: storage.listKeys()')(real);
    expect(lintInfra(keyInComment, expectations).map(ruleOf)).toContain('no-list-keys');
  });

  it('require the package entry point inside the staged package', () => {
    const problems = lintAzureYaml(real.azureYaml, serviceTagOf(real.bicep), { ...expectations, packageMain: 'lib/index.js' });
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

  it('stages every file package.json publishes, and stages it where git and azure.yaml expect', () => {
    // Everything the package publishes (its `files`, exclusions aside), and the app's own entry and host.json.
    const published = pkg.files.filter((path) => !path.startsWith('!'));
    expect(Object.values(PACKAGE_FILES)).toEqual(expect.arrayContaining([...published, 'dist/functions', 'package-lock.json']));
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
