// Five alerts and a workbook over the telemetry Baton exports with OpenTelemetry to Application
// Insights: metrics land in customMetrics (name = the instrument, attributes in customDimensions),
// leadership changes and run ends in customEvents, which sampling never drops.
//
// Log search alerts (scheduled query rules) rather than metric alerts: Baton's metrics are
// exported per instance and per export interval, so "no leader" has to combine two signals from
// every instance (an acquired transition, or a leader gauge at 1) and hold when neither arrives at
// all, which a query can say and a metric threshold cannot; and "a run failed" is an event, which
// metric alerts cannot read. The queries run against the Application Insights component, so they
// use its table names.

param appInsightsName string
param location string
@description('Tags for every resource: azd-env-name at least.')
param tags { *: string }

@description('The hub the app leads, named in the alerts so that several deployments stay apart.')
param hubName string

@description('E-mail address the alerts notify. Empty: no action group is created and the alerts notify nobody.')
param alertEmail string

@description('Whether to create the no-leader alert (off in an app that shares its hub with another app).')
param noLeaderAlert bool

@description('Start lag, in milliseconds, above which the start-lag alert fires: how late after its time a scheduled run may be created.')
param startLagAlertMs int

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

var notify = !empty(alertEmail)

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (notify) {
  name: 'ag-baton-${appInsightsName}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'baton'
    enabled: true
    emailReceivers: [
      {
        name: 'operator'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var actionGroups = notify ? [actionGroup.id] : []

// An idle leader holds a term only for a moment in each coordinator tick, so the gauge sampled at
// export time is usually 0 even while the hub is led: every acquired transition counts as well.
// Between occurrences an idle leader returns and leaves the lease resting (up to 10 minutes), and
// every tick that finds it so counts baton.leader.resting_ticks: idle by design, not leaderless.
// The query returns a row only when no signal came from any instance in the last 5 minutes, so
// the rule does not depend on how an empty result is counted.
resource noLeader 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = if (noLeaderAlert) {
  name: 'baton-no-leader-${appInsightsName}'
  location: location
  tags: tags
  properties: {
    displayName: 'Baton ${hubName}: no leader for 5 minutes'
    description: 'No instance acquired the lease of hub ${hubName}, none reported holding it, and none found it resting between occurrences (baton.leader.transitions with reason acquired, baton.leader.is_leader = 1, baton.leader.resting_ticks) for 5 minutes: scheduled runs are not starting and open runs are not being aggregated.'
    severity: 1
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: '''
let acquired = toscalar(customMetrics
    | where timestamp > ago(5m)
    | where name == "baton.leader.transitions" and tostring(customDimensions.reason) == "acquired"
    | summarize sum(valueSum));
let leading = toscalar(customMetrics
    | where timestamp > ago(5m)
    | where name == "baton.leader.is_leader"
    | summarize max(value));
let resting = toscalar(customMetrics
    | where timestamp > ago(5m)
    | where name == "baton.leader.resting_ticks"
    | summarize sum(valueSum));
print timestamp = now(), acquired = coalesce(acquired, 0.0), leading = coalesce(leading, 0.0), resting = coalesce(resting, 0.0)
| where acquired == 0 and leading < 1 and resting == 0
'''
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    // Stateful: one alert while the hub has no leader, resolved when one appears.
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

// The window is twice the frequency so that an event ingested a few minutes late is still seen;
// the alert is stateful, so an event seen by two evaluations notifies once.
resource runFailed 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'baton-run-failed-${appInsightsName}'
  location: location
  tags: tags
  properties: {
    displayName: 'Baton ${hubName}: a run failed or timed out'
    description: 'A baton.run.ended event with state failed or timed-out. One alert per job; its reason and run id are in the event.'
    severity: 2
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    criteria: {
      allOf: [
        {
          query: '''
customEvents
| where name == "baton.run.ended"
| extend state = tostring(customDimensions.state)
| where state in ("failed", "timed-out")
| project timestamp, job = tostring(customDimensions.job), runId = tostring(customDimensions.runId), state, reason = tostring(customDimensions.reason)
'''
          timeAggregation: 'Count'
          dimensions: [
            {
              name: 'job'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

// A schedule also fails by not running: each occurrence a job's state lists as skipped or missed
// is one event, so the alert fires per job on the first, with the occurrence and reason in it.
resource notRun 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'baton-not-run-${appInsightsName}'
  location: location
  tags: tags
  properties: {
    displayName: 'Baton ${hubName}: a scheduled occurrence was skipped or missed'
    description: 'A baton.schedule.not_run event: an occurrence of a job did not run (skipped by its overlap policy, or missed while nobody led or past its starting deadline). One alert per job; the occurrence and reason are in the event.'
    severity: 2
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    criteria: {
      allOf: [
        {
          query: '''
customEvents
| where name == "baton.schedule.not_run"
| project timestamp, job = tostring(customDimensions.job), occurrence = tostring(customDimensions.occurrence), outcome = tostring(customDimensions.outcome), reason = tostring(customDimensions.reason)
'''
          timeAggregation: 'Count'
          dimensions: [
            {
              name: 'job'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

// The largest start lag any instance recorded for a job in the window, against a threshold the
// deployer sets: a run created late is a schedule that did not keep time, whoever led.
resource startLag 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'baton-start-lag-${appInsightsName}'
  location: location
  tags: tags
  properties: {
    displayName: 'Baton ${hubName}: a scheduled run started late'
    description: 'baton.schedule.start_lag went above ${startLagAlertMs} ms: a scheduled run was created that long after its time. One alert per job.'
    severity: 3
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    criteria: {
      allOf: [
        {
          query: '''
customMetrics
| where name == "baton.schedule.start_lag"
| project timestamp, job = tostring(customDimensions.job), lag = valueMax
'''
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'lag'
          dimensions: [
            {
              name: 'job'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: startLagAlertMs
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

// A refusal is fencing doing its job (a stale leader's write was turned away), so the data is
// safe; it still means a leader was paused or cut off past its lease, which is worth a look.
resource fencingRefusals 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'baton-fencing-refusals-${appInsightsName}'
  location: location
  tags: tags
  properties: {
    displayName: 'Baton ${hubName}: fencing refusals'
    description: 'baton.fencing.refusals went above 0: storage refused a write from a leader whose epoch was stale.'
    severity: 2
    enabled: true
    scopes: [
      appInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    criteria: {
      allOf: [
        {
          query: '''
customMetrics
| where name == "baton.fencing.refusals"
| project timestamp, refusals = valueSum, instance = cloud_RoleInstance
'''
          timeAggregation: 'Total'
          metricMeasureColumn: 'refusals'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

// The workbook: one chart per metric over the chosen time range, and the two event streams.
// A workbook item that charts one query (type 3 is a query item in the workbook schema).
type queryItem = {
  type: 3
  content: {
    version: 'KqlItem/1.0'
    title: string
    query: string
    size: int
    queryType: int
    resourceType: string
    visualization: string
    timeContextFromParameter: string
    timeContext: {
      durationMs: int
    }
  }
}

func chart(title string, query string, visualization string) queryItem => {
  type: 3
  content: {
    version: 'KqlItem/1.0'
    title: title
    query: query
    size: 0
    queryType: 0
    resourceType: 'microsoft.insights/components'
    visualization: visualization
    timeContextFromParameter: 'TimeRange'
    timeContext: {
      durationMs: 86400000
    }
  }
}
var workbookContent = {
  version: 'Notebook/1.0'
  items: [
    {
      type: 1
      content: {
        json: '## Baton hub ${hubName}\nLeadership, runs and storage traffic from the OpenTelemetry metrics and events the app exports. The alerts on this hub are in Azure Monitor > Alerts.'
      }
    }
    {
      type: 9
      content: {
        version: 'KqlParameterItem/1.0'
        parameters: [
          {
            name: 'TimeRange'
            type: 4
            isRequired: true
            value: {
              durationMs: 86400000
            }
            typeSettings: {
              allowCustom: true
              selectableValues: [
                {
                  durationMs: 3600000
                }
                {
                  durationMs: 14400000
                }
                {
                  durationMs: 86400000
                }
                {
                  durationMs: 604800000
                }
              ]
            }
          }
        ]
      }
    }
    chart('Instances holding the lease (baton.leader.is_leader, max per 5 min)', '''
customMetrics
| where name == "baton.leader.is_leader"
| summarize leading = max(value) by bin(timestamp, 5m), cloud_RoleInstance
''', 'timechart')
    chart('Leadership transitions by reason (baton.leader.transitions)', '''
customMetrics
| where name == "baton.leader.transitions"
| summarize transitions = sum(valueSum) by bin(timestamp, 5m), reason = tostring(customDimensions.reason)
''', 'barchart')
    chart('Lease renewal time, ms (baton.lease.renew.duration)', '''
customMetrics
| where name == "baton.lease.renew.duration"
| summarize mean = sum(valueSum) / sum(valueCount), slowest = max(valueMax) by bin(timestamp, 5m)
''', 'timechart')
    chart('Fencing refusals (baton.fencing.refusals)', '''
customMetrics
| where name == "baton.fencing.refusals"
| summarize refusals = sum(valueSum) by bin(timestamp, 5m), cloud_RoleInstance
''', 'barchart')
    chart('Items by job and outcome (baton.items)', '''
customMetrics
| where name == "baton.items"
| summarize items = sum(valueSum) by bin(timestamp, 5m), series = strcat(tostring(customDimensions.job), " ", tostring(customDimensions.outcome))
''', 'timechart')
    chart('Run duration by job and end state, ms (baton.run.duration)', '''
customMetrics
| where name == "baton.run.duration"
| summarize runs = sum(valueCount), mean = sum(valueSum) / sum(valueCount), longest = max(valueMax) by job = tostring(customDimensions.job), state = tostring(customDimensions.state)
| order by job asc, state asc
''', 'table')
    chart('Open runs (baton.run.open, max over instances)', '''
customMetrics
| where name == "baton.run.open"
| summarize open = max(value) by bin(timestamp, 5m)
''', 'timechart')
    chart('Storage requests by operation (baton.storage.requests)', '''
customMetrics
| where name == "baton.storage.requests"
| summarize requests = sum(valueSum) by bin(timestamp, 5m), operation = tostring(customDimensions.operation)
''', 'timechart')
    chart('Leadership changes (baton.leadership.changed)', '''
customEvents
| where name == "baton.leadership.changed"
| project timestamp, identity = tostring(customDimensions.identity), epoch = toint(customDimensions.epoch), reason = tostring(customDimensions.reason)
| order by timestamp desc
''', 'table')
    chart('Runs that ended (baton.run.ended)', '''
customEvents
| where name == "baton.run.ended"
| project timestamp, job = tostring(customDimensions.job), runId = tostring(customDimensions.runId), state = tostring(customDimensions.state), reason = tostring(customDimensions.reason)
| order by timestamp desc
''', 'table')
  ]
  fallbackResourceIds: [
    appInsights.id
  ]
}

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  // A workbook's name must be a GUID; this one is stable per component, so provisioning again updates it.
  name: guid(appInsights.id, 'baton-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'Baton ${hubName}'
    category: 'workbook'
    // Lowercase, as the portal matches it when it lists the component's workbooks.
    sourceId: toLower(appInsights.id)
    serializedData: string(workbookContent)
  }
}
