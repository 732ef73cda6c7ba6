// What one app needs on its storage account: a container for its deployment package, the data
// roles for its identity (two, three with the durable engine) and, when a deployer is named, the
// roles the baton CLI needs to look at (and optionally steer) the hub, all scoped to this one
// account. Deployed into the account's resource group, so a second app (another region, same
// hub) can join an existing account.

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

// For the deployer, reading: baton status, runs, show and failures read blobs only (the lease,
// run records, the run index, failure parts).
var storageBlobDataReader = '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'
// For the deployer, steering: baton trigger and cancel write request blobs (Storage Blob Data
// Contributor, which reads too) and send the wake message that ends an idle leader's rest
// (Storage Queue Data Message Sender: it can add messages, not read or delete them).
var storageBlobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
var storageQueueDataMessageSender = 'c6a89b2d-59bc-44d0-9896-0f6e12d7b80a'
var deployerNamed = !empty(deployerPrincipalId)

resource storage 'Microsoft.Storage/storageAccounts@2025-06-01' existing = {
  name: storageAccountName
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2025-06-01' existing = {
  parent: storage
  name: 'default'
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

resource deployerBlobRead 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (deployerNamed && !deployerCanSteer) {
  name: guid(storage.id, deployerPrincipalId, storageBlobDataReader)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataReader)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

resource deployerBlobWrite 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (deployerNamed && deployerCanSteer) {
  name: guid(storage.id, deployerPrincipalId, storageBlobDataContributor)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

resource deployerQueueSend 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (deployerNamed && deployerCanSteer) {
  name: guid(storage.id, deployerPrincipalId, storageQueueDataMessageSender)
  scope: storage
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
