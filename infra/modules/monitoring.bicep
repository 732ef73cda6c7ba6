// Workspace-based Application Insights that accepts Entra-authenticated telemetry only, and
// the one role that lets the app's identity send it.

param workspaceName string
param appInsightsName string
param location string
@description('Tags for every resource: azd-env-name at least.')
param tags { *: string }

@description('Principal (object) id of the identity that sends telemetry.')
param publisherPrincipalId string

// Monitoring Metrics Publisher: the role Application Insights checks for Entra-authenticated
// ingestion. It grants nothing on logs already stored.
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

resource workspace 'Microsoft.OperationalInsights/workspaces@2025-07-01' = {
  name: workspaceName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    // The connection string then identifies the component but cannot be used to write to it:
    // ingestion needs the identity named in APPLICATIONINSIGHTS_AUTHENTICATION_STRING.
    DisableLocalAuth: true
  }
}

resource publisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, publisherPrincipalId, monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: publisherPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output appInsightsName string = appInsights.name
