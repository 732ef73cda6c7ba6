// The account Baton coordinates through (leases, run records, queues) and the Functions host
// keeps its own state in. Shared keys are off, so the only way in is an Entra identity with a
// data role: there is no account key to leak and nothing to rotate.

@minLength(3)
@maxLength(24)
param name string

param location string
@description('Tags for every resource: azd-env-name at least.')
param tags { *: string }

@description('Blob containers to create before the app starts.')
param containerNames string[]

@description('Queues to create before the app starts.')
param queueNames string[]

resource storage 'Microsoft.Storage/storageAccounts@2025-06-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowSharedKeyAccess: false
    // The portal and tools then sign in with Entra too instead of asking for a key that does not work.
    defaultToOAuthAuthentication: true
    allowBlobPublicAccess: false
    allowCrossTenantReplication: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2025-06-01' = {
  parent: storage
  name: 'default'
}

resource containers 'Microsoft.Storage/storageAccounts/blobServices/containers@2025-06-01' = [
  for containerName in containerNames: {
    parent: blobService
    name: containerName
    properties: {
      publicAccess: 'None'
    }
  }
]

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2025-06-01' = {
  parent: storage
  name: 'default'
}

resource queues 'Microsoft.Storage/storageAccounts/queueServices/queues@2025-06-01' = [
  for queueName in queueNames: {
    parent: queueService
    name: queueName
  }
]

output name string = storage.name
