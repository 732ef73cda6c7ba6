// What one app needs on its storage account: a container for its deployment package, the data
// roles for its identity (two, three with the durable engine), scoped to this one account, and,
// when a deployer is named, the roles the baton CLI needs to look at (and optionally steer) the
// hub, each scoped to the one container or queue it uses. Deployed into the account's resource
// group, so a second app (another region, same hub) can join an existing account.

@minLength(3)
@maxLength(24)
param storageAccountName string

@minLength(3)
@maxLength(63)
param deploymentContainerName string

@description('Principal (object) id of the app\'s user-assigned identity.')
param principalId string

@description('Whether the identity gets Storage Table Data Contributor: only the durable engine needs tables.')
param grantTableData bool

@description('Object id of the person, group or pipeline that deploys, for the baton CLI against this account. Empty: none.')
param deployerPrincipalId string

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param deployerPrincipalType string

@description('Whether the deployer may also trigger and cancel runs, not only read them.')
param deployerCanSteer bool

@minLength(3)
@maxLength(63)
@description('The hub\'s container, <hub>-runs: run records and index, failures, job states, leadership and requests.')
param hubContainerName string

@minLength(3)
@maxLength(63)
@description('The container of lease blobs (BATON_LEASE_CONTAINER).')
param leaseContainerName string

@minLength(3)
@maxLength(63)
@description('Shard 0\'s work queue, <hub>-work, where a trigger sends the tick that wakes a resting leader.')
param wakeQueueName string

// Storage Blob Data Owner rather than Storage Blob Data Contributor: Microsoft documents it as
// the minimum for the Functions host's own storage with an identity (AzureWebJobsStorage:
// timer locks, host keys and the containers it creates for them), and Flex Consumption reads
// the package with it. What it adds over Contributor (container ACLs, blob ownership and tags)
// stays inside this account, which holds nothing but Baton's and the host's data. The same
// assignment covers Baton's lease blob, run records and the sample job's container.
// https://learn.microsoft.com/azure/azure-functions/functions-reference#connecting-to-host-storage-with-an-identity
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
// Storage Queue Data Contributor: the queue trigger receives, updates and deletes work messages
// and moves spent ones to the poison queue; Baton sends work and results and creates missing
// queues at the start of a leader term. The message-only roles cannot create a queue.
var storageQueueDataContributor = '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
// Storage Table Data Contributor: the Durable Task extension's Azure Storage provider keeps
// orchestration history and instances in tables. The queue engine never touches a table, so it
// does without (the host then logs that it cannot write its diagnostic events there).
var storageTableDataContributor = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'

// The deployer gets nothing on the account: it also holds this app's package, which Flex
// Consumption runs as the app's identity, and the results queue, where a message counts as a
// worker's result. Reading: baton status, runs, show and failures read blobs in the hub
// container and the lease blob, and nothing else.
var storageBlobDataReader = '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'
// Steering adds to reading: baton trigger and cancel create request blobs under requests/ (the
// request writer below) and send the tick that ends a resting leader's rest (Message Sender can
// add messages, not read or delete them).
var storageQueueDataMessageSender = 'c6a89b2d-59bc-44d0-9896-0f6e12d7b80a'
var deployerNamed = !empty(deployerPrincipalId)
var deployerSteers = deployerNamed && deployerCanSteer
// Storage Blob Data Contributor would also let the deployer delete the hub container, its whole
// history, and no condition can limit that. Blob writes are what a condition can limit by path:
// the prefix src/hub/requests.ts writes under, every other blob of the container left alone.
var requestWriteCondition = '''
(
  (
    !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write'})
  )
  OR
  (
    @Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] StringStartsWith 'requests/'
  )
)
'''

resource storage 'Microsoft.Storage/storageAccounts@2025-06-01' existing = {
  name: storageAccountName
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2025-06-01' existing = {
  parent: storage
  name: 'default'
}

// Created by storage.bicep, or by the deployment that made a shared account.
resource hubContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2025-06-01' existing = {
  parent: blobService
  name: hubContainerName
}

resource leaseContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2025-06-01' existing = {
  parent: blobService
  name: leaseContainerName
}

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2025-06-01' existing = {
  parent: storage
  name: 'default'
}

resource wakeQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2025-06-01' existing = {
  parent: queueService
  name: wakeQueueName
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2025-06-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource blobData 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, principalId, storageBlobDataOwner)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource queueData 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, principalId, storageQueueDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageQueueDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource tableData 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantTableData) {
  name: guid(storage.id, principalId, storageTableDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource deployerHubRead 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (deployerNamed) {
  name: guid(hubContainer.id, deployerPrincipalId, storageBlobDataReader)
  scope: hubContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataReader)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

resource deployerLeaseRead 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (deployerNamed) {
  name: guid(leaseContainer.id, deployerPrincipalId, storageBlobDataReader)
  scope: leaseContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataReader)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

// Creating a role definition takes Microsoft.Authorization/roleDefinitions/write (Owner or User
// Access Administrator), so only steering makes one: a reader-only deploy needs no more than
// before. Its name and GUID follow the account and hub, so apps sharing a hub update one
// definition; role names are unique in the tenant. No control action: the CLI's document store
// creates a container only when a write finds it missing, which this hub's never is.
resource requestWriter 'Microsoft.Authorization/roleDefinitions@2022-04-01' = if (deployerSteers) {
  name: guid(hubContainer.id, 'baton-request-writer')
  properties: {
    roleName: 'Baton request writer (${storageAccountName}, ${hubContainerName})'
    description: 'Write blobs (the condition of its assignment limits them to requests/), for baton trigger and cancel.'
    type: 'CustomRole'
    assignableScopes: [
      resourceGroup().id
    ]
    permissions: [
      {
        actions: []
        notActions: []
        dataActions: [
          'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write'
        ]
        notDataActions: []
      }
    ]
  }
}

resource deployerRequestWrite 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (deployerSteers) {
  name: guid(hubContainer.id, deployerPrincipalId, requestWriter.id)
  scope: hubContainer
  properties: {
    roleDefinitionId: requestWriter.id
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
    conditionVersion: '2.0'
    condition: requestWriteCondition
  }
}

resource deployerWake 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (deployerSteers) {
  name: guid(wakeQueue.id, deployerPrincipalId, storageQueueDataMessageSender)
  scope: wakeQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageQueueDataMessageSender)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

output blobEndpoint string = storage.properties.primaryEndpoints.blob
output queueEndpoint string = storage.properties.primaryEndpoints.queue
output tableEndpoint string = storage.properties.primaryEndpoints.table
output deploymentContainerName string = deploymentContainer.name
