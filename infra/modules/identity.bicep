// The one identity the app runs as. User-assigned rather than system-assigned so its role
// assignments are in place before the app is created, and so one client id serves the host's
// storage, the deployment package, Baton and telemetry alike.

@description('Name of the user-assigned managed identity.')
param name string

param location string
@description('Tags for every resource: azd-env-name at least.')
param tags { *: string }

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2024-11-30' = {
  name: name
  location: location
  tags: tags
}

output id string = identity.id
output principalId string = identity.properties.principalId
output clientId string = identity.properties.clientId
