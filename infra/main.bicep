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
@description('BATON_QUEUE_SHARDS: work and results queues each run is spread over (1-16), with a queue trigger per shard. Past 10 shards the hub name must be at most 47 characters. Azure targets 2,000 messages per second per queue.')
param queueShards int = 1

@minValue(1)
@maxValue(1000)
@description('Most instances Flex Consumption may run for this app. Each instance polls the work queue, so this also caps storage requests and cost.')
param maximumInstanceCount int = 40

@description('Leave empty to create a storage account. Set it to the storage account of another Baton deployment to run this app beside it (a second app or region on the same hub): the account must already hold the hub\'s containers and queues, and only this app\'s package container and role assignments are added to it.')
param sharedStorageAccountName string = ''

@description('Resource group of sharedStorageAccountName, in this subscription. Empty means this deployment\'s resource group.')
param sharedStorageResourceGroupName string = ''

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
// Baton's defaults, written out so the storage layout and the app settings cannot drift apart.
var leaseContainerName = 'leases'
var auditContainerName = 'audit-demo'

resource rg 'Microsoft.Resources/resourceGroups@2021-04-01' = {
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
    containerNames: [
      '${hubName}-runs'
      leaseContainerName
      auditContainerName
    ]
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
  dependsOn: [
    rg
    storage
  ]
  params: {
    storageAccountName: storageAccountName
    deploymentContainerName: deploymentContainerName
    principalId: identity.outputs.principalId
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
    blobEndpoint: storageAccess.outputs.blobEndpoint
    queueEndpoint: storageAccess.outputs.queueEndpoint
    deploymentContainerName: storageAccess.outputs.deploymentContainerName
    maximumInstanceCount: maximumInstanceCount
    hubName: hubName
    coordinatorSchedule: coordinatorSchedule
    leaseSeconds: leaseSeconds
    queueShards: queueShards
    leaseContainerName: leaseContainerName
    auditContainerName: auditContainerName
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
