// Baton on Azure Functions Flex Consumption, keyless end to end: the app reaches storage and
// Application Insights only through its user-assigned identity, so there is no key to leak or
// rotate. azd deploys this at subscription scope (it creates the resource group); every role
// assignment lives in a module and is scoped to one resource, never to the subscription or group.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment. It seeds every resource name and is tagged on every resource as azd-env-name.')
param environmentName string

@minLength(1)
@description('Region of every resource. It must offer Flex Consumption: az functionapp list-flexconsumption-locations lists them.')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@minLength(1)
@maxLength(51)
@description('BATON_HUB: lowercase letters, digits and single inner hyphens, 1-51 characters. It names the lease blob leases/<hub>, the container <hub>-runs and the queues <hub>-work, <hub>-results and <hub>-work-poison; Storage refuses a name that breaks these rules when it creates the queues, and Baton refuses it at start-up. Apps that share a hub and a storage account share one leader.')
param hubName string = 'baton'

@minLength(1)
@description('BATON_COORDINATOR_SCHEDULE: NCRONTAB (sec min hour day month weekday, UTC) of the coordinator timer. Baton checks it at start-up.')
param coordinatorSchedule string = '*/10 * * * * *'

@minValue(15)
@maxValue(60)
@description('BATON_LEASE_SECONDS: the leader lease term. Azure blob leases last 15-60 seconds.')
param leaseSeconds int = 15

@minValue(1)
@maxValue(16)
@description('BATON_QUEUE_SHARDS: work and results queues each run is spread over (1-16), with a queue trigger per shard. Past 10 shards the hub name must be at most 47 characters. Azure targets 2,000 messages per second per queue. The durable engine refuses more than 1.')
param queueShards int = 1

@minValue(1)
@maxValue(36500)
@description('BATON_RETENTION_DAYS: days a run (its record, failures, manifest, attachments and index entries) is kept after the day it was created; the idle leader deletes older runs in small slices.')
param retentionDays int = 30

@description('BATON_OUTPUT_RETENTION_DAYS: days a run\'s output is kept, 1-36500, shorter or longer than BATON_RETENTION_DAYS. Empty: as long as the run.')
param outputRetentionDays string = ''

// Empty means Baton's own default: Baton reads a blank setting as unset, and this one has no
// fixed default to write (two thirds of the lease).
@description('BATON_RENEW_DEADLINE_SECONDS: how long after its last successful renewal a leader keeps trying to renew; whole seconds, less than BATON_LEASE_SECONDS and more than 1.2 x a third of it (7-14 with a 15 s lease). Empty: two thirds of the lease.')
param renewDeadlineSeconds string = ''

@minValue(0)
@maxValue(59000)
@description('BATON_TAKEOVER_MS: crash takeover, how long a leader\'s beats may stop before another instance breaks its lease and leads; 0 turns it off, else 1000 to less than the renew deadline.')
param takeoverMs int = 3000

@minLength(3)
@maxLength(63)
@description('BATON_LEASE_CONTAINER: the container of lease blobs. Baton checks the name at start-up.')
param leaseContainerName string = 'leases'

@minValue(5)
@maxValue(3600)
@description('BATON_TERM_SECONDS: longest a leader keeps the lease in one coordinator tick (it returns sooner when idle).')
param termSeconds int = 60

@description('BATON_REST_WHEN_IDLE: whether a leader with nothing open returns between occurrences and leaves the lease resting until the next one (or a trigger) needs a leader, instead of holding a coordinator invocation open, and billed, for its whole term.')
param restWhenIdle bool = true

@minValue(1)
@maxValue(100)
@description('BATON_MAX_ATTEMPTS: deliveries of a work message before its failures are final. The queue trigger\'s maxDequeueCount is set to the same value; Baton refuses to start if host.json disagrees.')
param maxAttempts int = 5

@minValue(16)
@maxValue(1000000)
@description('BATON_MAX_IN_FLIGHT: most work messages of one run sent but not yet counted, over all queue shards; dispatch waits for the fold beyond it.')
param maxInFlight int = 4096

@allowed([
  'info'
  'debug'
])
@description('BATON_LOG_LEVEL: debug adds the elector\'s per-renewal and the timer\'s per-tick lines; it also lets the host pass the functions\' Debug lines.')
param logLevel string = 'info'

@allowed([
  'queue'
  'durable'
])
@description('BATON_ENGINE: which engine runs the jobs. durable also grants the identity Storage Table Data Contributor (the Durable Task extension keeps history in tables) and needs a BATON_HUB of 3-45 letters and digits starting with a letter, since it names the task hub.')
param engine string = 'queue'

@allowed([
  'none'
  'console'
  'otlp'
])
@description('BATON_METRICS_EXPORTER: a second destination for metrics and events besides Application Insights: console prints each one to the log, otlp sends them to the OTEL_EXPORTER_OTLP_* endpoint. Leave none on Azure.')
param metricsExporter string = 'none'

@description('BATON_SAMPLE_JOB: whether the app runs the sample blob-audit job. Off, neither its container nor its setting is deployed.')
param sampleJob bool = false

@minLength(3)
@maxLength(63)
@description('BATON_AUDIT_CONTAINER: the container the sample blob-audit job scrubs, created and set only with BATON_SAMPLE_JOB.')
param auditContainerName string = 'audit-demo'

@description('BATON_SYNTHETIC_JOBS: optional JSON array of synthetic jobs with known output, for load and soak tests. Empty: none. azd pastes the value into main.parameters.json as text, so write its double quotes as \\".')
param syntheticJobs string = ''

@minValue(1)
@maxValue(1000)
@description('Most instances Flex Consumption may run for this app. Each instance polls the work queue, so this also caps storage requests and cost.')
param maximumInstanceCount int = 40

@description('BATON_APP_VERSION: this deploy\'s version, recorded with each epoch its instances take so the status shows which version leads. Empty: the package\'s version.')
param appVersion string = ''

@minValue(0)
@maxValue(1000)
@description('BATON_LEADER_PRIORITY: this app\'s leader priority, ranked after the version.')
param leaderPriority int = 0

@description('Leave empty to create a storage account. Set it to the storage account of another Baton deployment to run this app beside it (a second app or region on the same hub): the account must already hold the hub\'s containers and queues, and only this app\'s package container and role assignments are added to it.')
param sharedStorageAccountName string = ''

@description('Resource group of sharedStorageAccountName, in this subscription. Empty means this deployment\'s resource group.')
param sharedStorageResourceGroupName string = ''

@description('Object id of whoever deploys: azd passes the signed-in user (AZURE_PRINCIPAL_ID). It gets the storage roles the baton CLI needs to read this hub (status, runs, show, failures) on the hub and lease containers, so the deployment can be looked at the moment azd up ends. Empty: no role for anyone but the app.')
param deployerPrincipalId string = ''

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
@description('What deployerPrincipalId is: User (the default, a person signed in to azd), Group, or ServicePrincipal (a pipeline that deploys).')
param deployerPrincipalType string = 'User'

@description('Whether the deployer may also steer the hub (baton trigger and cancel): blob writes under requests/ in the hub container (a custom role, which takes Owner or User Access Administrator to create) and Storage Queue Data Message Sender on <hub>-work, beside its reading.')
param deployerCanSteer bool = false

@minValue(1)
@description('Start lag, in milliseconds, above which the start-lag alert fires (how late after its time a scheduled run may be created). Default 60 s: past a leader change by lease expiry.')
param startLagAlertMs int = 60000

@description('E-mail address that the alerts notify. Empty: the alerts fire in Azure Monitor without notifying anyone; attach your own action group to them.')
param alertEmail string = ''

@allowed([
  'keys'
  'entra'
])
@description('BATON_HTTP_AUTH: who may call the HTTP API and open the page. keys: a function key for reads, the admin key for trigger and cancel. entra: App Service authentication signs callers in with Entra ID (the app registration of entraClientId) and no key is taken; reads need a signed-in caller, trigger and cancel the app role Baton.Steer.')
param httpAuth string = 'keys'

@description('Client (application) id of the Entra app registration that signs callers in when BATON_HTTP_AUTH is entra: its app role Baton.Steer lets a caller trigger and cancel. Required then; unused with keys.')
param entraClientId string = ''

@description('Whether to create the no-leader alert. Turn it off in an app that shares its hub with another app: it sees only its own instances, and the other app may hold the lease for long stretches.')
param noLeaderAlert bool = true

// Part of the app's and the identity's names; azure.yaml's service and the app's azd-service-name
// tag (modules/function-app.bicep) use the same word.
var serviceName = 'baton'
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
var resourceGroupName = 'rg-${environmentName}'
var useSharedStorage = !empty(sharedStorageAccountName)
var storageAccountName = useSharedStorage ? sharedStorageAccountName : 'st${resourceToken}'
var storageResourceGroupName = useSharedStorage && !empty(sharedStorageResourceGroupName) ? sharedStorageResourceGroupName : resourceGroupName
// The Functions host derives its host id from the first 32 characters of the app name, and two
// apps on one storage account must not share a host id: the token keeps every deployment apart.
var functionAppName = 'func-${serviceName}-${resourceToken}'
var deploymentContainerName = 'deploy-${functionAppName}'

resource rg 'Microsoft.Resources/resourceGroups@2025-04-01' = {
  name: resourceGroupName
  location: location
  tags: tags
}

module identity 'modules/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-${serviceName}-${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    workspaceName: 'log-${resourceToken}'
    appInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
    publisherPrincipalId: identity.outputs.principalId
  }
}

// Shards past the first: <hub>-work-s<k>, <hub>-results-s<k> and <hub>-work-s<k>-poison.
var shardQueueNames = flatten(map(range(1, queueShards - 1), k => [
  '${hubName}-work-s${k}'
  '${hubName}-results-s${k}'
  '${hubName}-work-s${k}-poison'
]))

// Created here so every hub resource exists before the first instance starts; Baton still
// creates any that go missing (queues at the start of each leader term, containers on first
// write), which the roles below allow and which does nothing when they exist.
module storage 'modules/storage.bicep' = if (!useSharedStorage) {
  name: 'storage'
  scope: rg
  params: {
    name: storageAccountName
    location: location
    tags: tags
    containerNames: concat([
      '${hubName}-runs'
      leaseContainerName
    ], sampleJob ? [auditContainerName] : [])
    queueNames: concat([
      '${hubName}-work'
      '${hubName}-results'
      '${hubName}-work-poison'
    ], shardQueueNames)
  }
}

module storageAccess 'modules/storage-access.bicep' = {
  // Unique per deployment: with a shared account, several deployments write into one group.
  name: 'storage-access-${resourceToken}'
  scope: resourceGroup(storageResourceGroupName)
  // The deployer's roles are scoped to containers and a queue the storage module creates.
  dependsOn: [
    storage
  ]
  params: {
    storageAccountName: storageAccountName
    deploymentContainerName: deploymentContainerName
    principalId: identity.outputs.principalId
    grantTableData: engine == 'durable'
    deployerPrincipalId: deployerPrincipalId
    deployerPrincipalType: deployerPrincipalType
    deployerCanSteer: deployerCanSteer
    hubContainerName: '${hubName}-runs'
    leaseContainerName: leaseContainerName
    wakeQueueName: '${hubName}-work'
  }
}

module app 'modules/function-app.bicep' = {
  name: 'function-app'
  scope: rg
  params: {
    name: functionAppName
    planName: 'plan-${resourceToken}'
    location: location
    tags: tags
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    appInsightsName: monitoring.outputs.appInsightsName
    storageAccountName: storageAccountName
    blobEndpoint: storageAccess.outputs.blobEndpoint
    queueEndpoint: storageAccess.outputs.queueEndpoint
    tableEndpoint: storageAccess.outputs.tableEndpoint
    deploymentContainerName: storageAccess.outputs.deploymentContainerName
    maximumInstanceCount: maximumInstanceCount
    hubName: hubName
    coordinatorSchedule: coordinatorSchedule
    leaseSeconds: leaseSeconds
    renewDeadlineSeconds: renewDeadlineSeconds
    takeoverMs: takeoverMs
    queueShards: queueShards
    retentionDays: retentionDays
    outputRetentionDays: outputRetentionDays
    leaseContainerName: leaseContainerName
    termSeconds: termSeconds
    restWhenIdle: restWhenIdle
    maxAttempts: maxAttempts
    maxInFlight: maxInFlight
    logLevel: logLevel
    engine: engine
    metricsExporter: metricsExporter
    sampleJob: sampleJob
    auditContainerName: auditContainerName
    syntheticJobs: syntheticJobs
    appVersion: appVersion
    leaderPriority: leaderPriority
    httpAuth: httpAuth
    entraClientId: entraClientId
  }
}

module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    appInsightsName: monitoring.outputs.appInsightsName
    location: location
    tags: tags
    hubName: hubName
    alertEmail: alertEmail
    noLeaderAlert: noLeaderAlert
    startLagAlertMs: startLagAlertMs
  }
}

// Names and endpoints only: azd stores outputs in .azure/<env>/.env, so none of them may be a credential.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_NAME string = app.outputs.name
output SERVICE_BATON_NAME string = app.outputs.name
output AZURE_FUNCTION_HOSTNAME string = app.outputs.defaultHostName
output AZURE_STORAGE_ACCOUNT_NAME string = storageAccountName
output AZURE_STORAGE_RESOURCE_GROUP string = storageResourceGroupName
output AZURE_STORAGE_BLOB_ENDPOINT string = storageAccess.outputs.blobEndpoint
output AZURE_STORAGE_QUEUE_ENDPOINT string = storageAccess.outputs.queueEndpoint
output AZURE_MANAGED_IDENTITY_CLIENT_ID string = identity.outputs.clientId
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.appInsightsName
output BATON_HUB string = hubName
