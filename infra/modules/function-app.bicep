// The Flex Consumption app. Every connection it has is identity-based: its app settings hold
// an account name and a client id, never a key, so reading them (portal, ARM, azd env) grants nothing.

param name string
param planName string
param location string
@description('Tags for every resource: azd-env-name at least.')
param tags { *: string }

@description('Resource id of the user-assigned identity the app runs as.')
param identityId string

@description('Client id of that identity: the Functions host, Baton and the telemetry exporter pick it by this id.')
param identityClientId string

param appInsightsName string

@description('Storage account the host and Baton use, by name: both derive its blob, queue and table endpoints from it.')
param storageAccountName string

@description('Blob endpoint of the storage account, with its trailing slash: the deployment package lives there.')
param blobEndpoint string

@description('Queue endpoint of the storage account, with its trailing slash.')
param queueEndpoint string

@description('Table endpoint of the storage account, with its trailing slash.')
param tableEndpoint string

param deploymentContainerName string

@minValue(1)
@maxValue(1000)
param maximumInstanceCount int

// Baton's settings, described in main.bicep, which passes each one through unchanged.
param hubName string
param coordinatorSchedule string

@minValue(15)
@maxValue(60)
param leaseSeconds int

param renewDeadlineSeconds string

@minValue(0)
param takeoverMs int

@minValue(1)
@maxValue(16)
param queueShards int
param retentionDays int
param outputRetentionDays string

param leaseContainerName string
param termSeconds int
param restWhenIdle bool
param maxAttempts int
param maxInFlight int

@allowed([
  'info'
  'debug'
])
param logLevel string

@allowed([
  'queue'
  'durable'
])
param engine string

@allowed([
  'none'
  'console'
  'otlp'
])
param metricsExporter string

param sampleJob bool
param auditContainerName string
param syntheticJobs string
param appVersion string

@minValue(0)
@maxValue(1000)
param leaderPriority int

@allowed([
  'keys'
  'entra'
])
param httpAuth string
param entraClientId string

// Read here rather than passed in, so the connection string never travels as a module output.
resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource plan 'Microsoft.Web/serverfarms@2025-03-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    // Flex Consumption runs on Linux only.
    reserved: true
  }
}

resource app 'Microsoft.Web/sites@2025-03-01' = {
  name: name
  location: location
  // azd deploys to the resource carrying the service name of azure.yaml.
  tags: union(tags, {
    'azd-service-name': 'baton'
  })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${blobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: 2048
      }
      runtime: {
        name: 'node'
        version: '22'
      }
    }
  }
}

// Entra sign-in in front of every route, instead of keys: App Service authentication signs a
// browser in (the page) and takes a bearer token for the app registration (an API client), and
// answers anything else before it reaches the app. No client secret: a browser signs in with the
// ID token alone, so the template holds no credential. No token store either: it would need a
// storage SAS. Baton then reads the caller App Service vouches for (src/app/http-auth.ts).
resource entraSignIn 'Microsoft.Web/sites/config@2025-03-01' = if (httpAuth == 'entra') {
  parent: app
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
    }
    globalValidation: {
      requireAuthentication: true
      unauthenticatedClientAction: 'RedirectToLoginPage'
      redirectToProvider: 'azureactivedirectory'
    }
    httpSettings: {
      requireHttps: true
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: entraClientId
          openIdIssuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
        }
        validation: {
          allowedAudiences: [
            'api://${entraClientId}'
            entraClientId
          ]
        }
      }
    }
    login: {
      tokenStore: {
        enabled: false
      }
    }
  }
}

// With basic credentials off, publishing (azd, Core Tools) has to present an Entra token.
resource ftpPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2025-03-01' = {
  parent: app
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2025-03-01' = {
  parent: app
  name: 'scm'
  properties: {
    allow: false
  }
}

// Baton's console lines reach the host at Information, so BATON_LOG_LEVEL alone decides whether
// its debug lines show; a function's context.debug lines (the coordinator's per-tick line) are
// Debug in Function.<name>.User, which host.json keeps out. Debug lets them through, here
// rather than in host.json so that the default stays quiet.
var debugLogSettings = logLevel == 'debug' ? {
  AzureFunctionsJobHost__logging__logLevel__Function: 'Debug'
} : {}

// Outside Azure's public cloud the host cannot derive the endpoints from the account name (it
// assumes the public cloud's suffix), so there they are given whole, as the account reports
// them. In the public cloud the name alone stays, for the reason given at the settings below.
var storageEndpointSettings = environment().name == 'AzureCloud' ? {} : {
  AzureWebJobsStorage__blobServiceUri: blobEndpoint
  AzureWebJobsStorage__queueServiceUri: queueEndpoint
  AzureWebJobsStorage__tableServiceUri: tableEndpoint
}

// The sample job's container is named only when the sample runs.
var sampleSettings = sampleJob ? {
  BATON_AUDIT_CONTAINER: auditContainerName
} : {}

// The whole set: a setting added by hand in the portal is removed on the next provision.
// Flex Consumption takes the runtime and package location from functionAppConfig, so the
// worker-runtime, extension-version and run-from-package settings of other plans are absent.
resource appSettings 'Microsoft.Web/sites/config@2025-03-01' = {
  parent: app
  name: 'appsettings'
  properties: union({
    // The account name rather than per-service URIs: on Flex Consumption the host can fail to build
    // its blob client from __blobServiceUri at start-up (intermittent 401s, "host unhealthy";
    // azure-functions-host#11787, infra/README.md). Baton derives its blob and queue endpoints from
    // the name, and the Durable extension its table endpoint too.
    AzureWebJobsStorage__accountName: storageAccountName
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    // Not a secret (Microsoft documents it as an identifier), and with local auth off on the
    // component it cannot be used to send telemetry without the identity below.
    APPLICATIONINSIGHTS_CONNECTION_STRING: appInsights.properties.ConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
    BATON_HUB: hubName
    BATON_COORDINATOR_SCHEDULE: coordinatorSchedule
    BATON_LEASE_SECONDS: string(leaseSeconds)
    BATON_RENEW_DEADLINE_SECONDS: renewDeadlineSeconds
    BATON_TAKEOVER_MS: string(takeoverMs)
    BATON_QUEUE_SHARDS: string(queueShards)
    BATON_RETENTION_DAYS: string(retentionDays)
    BATON_OUTPUT_RETENTION_DAYS: outputRetentionDays
    BATON_LEASE_CONTAINER: leaseContainerName
    BATON_TERM_SECONDS: string(termSeconds)
    BATON_REST_WHEN_IDLE: string(restWhenIdle)
    BATON_MAX_ATTEMPTS: string(maxAttempts)
    // The host's own retry count follows Baton's, so the worker's last attempt is the host's last delivery.
    AzureFunctionsJobHost__extensions__queues__maxDequeueCount: string(maxAttempts)
    BATON_MAX_IN_FLIGHT: string(maxInFlight)
    BATON_LOG_LEVEL: logLevel
    BATON_ENGINE: engine
    BATON_METRICS_EXPORTER: metricsExporter
    BATON_SAMPLE_JOB: string(sampleJob)
    BATON_SYNTHETIC_JOBS: syntheticJobs
    BATON_APP_VERSION: appVersion
    BATON_LEADER_PRIORITY: string(leaderPriority)
    BATON_HTTP_AUTH: httpAuth
  }, storageEndpointSettings, sampleSettings, debugLogSettings)
}

output name string = app.name
output defaultHostName string = app.properties.defaultHostName
