// deploy/ against the gateway it watches: promtool accepts the scrape config, the alert rules, the
// dashboard's queries and a live scrape, and every metric name deploy/ refers to is one the gateway
// really exports (a renamed metric must not leave a silent alert or an empty panel behind).
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import t from 'tap'
import { startGateway } from '../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../helpers/config-fixture.js'
import { REPO_ROOT } from '../helpers/processes.js'
import { metricNames, scrape } from '../helpers/scrape.js'

const DEPLOY = join(REPO_ROOT, 'deploy')
const PROMTOOL = process.env.PROMTOOL ?? 'promtool'
const REQUIRED_METRICS = [
  'gateway_requests_total', 'gateway_request_duration_seconds', 'gateway_upstream_duration_seconds',
  'gateway_ratelimit_rejections_total', 'gateway_bans_total', 'gateway_banned_keys',
  'gateway_deprecated_requests_total', 'gateway_store_errors_total', 'gateway_store_fallback_active',
  'gateway_config_reloads_total', 'gateway_keys_expiring', 'gateway_keys_expired', 'gateway_shadow_rejections_total',
  'gateway_quota_overage_total', 'gateway_quota_consumers_near_limit'
]

function promtool (args: string[], input?: string): { code: number | null, output: string } {
  const res = spawnSync(PROMTOOL, args, { input, encoding: 'utf8', timeout: 30_000 })
  if (res.error !== undefined) throw res.error
  return { code: res.status, output: `${res.stdout}${res.stderr}` }
}

function filesUnder (dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : [path]
  })
}

/** Metric names of the gateway's own families and of prom-client's process/Node defaults. */
const METRIC_REF = /\b(?:gateway|process|nodejs)_[a-z0-9_]*[a-z0-9]\b/g

function referencedMetrics (): Map<string, string[]> {
  const refs = new Map<string, string[]>()
  for (const file of filesUnder(DEPLOY)) {
    for (const name of readFileSync(file, 'utf8').match(METRIC_REF) ?? []) {
      const where = refs.get(name) ?? []
      where.push(relative(REPO_ROOT, file))
      refs.set(name, where)
    }
  }
  return refs
}

interface DashboardPanel { title?: string, targets?: Array<{ expr?: string }>, panels?: DashboardPanel[] }

function dashboardQueries (): Array<{ file: string, title: string, expr: string }> {
  const queries: Array<{ file: string, title: string, expr: string }> = []
  for (const file of filesUnder(join(DEPLOY, 'grafana')).filter((f) => f.endsWith('.json'))) {
    const walk = (panels: DashboardPanel[]): void => {
      for (const p of panels) {
        for (const target of p.targets ?? []) if (target.expr !== undefined) queries.push({ file, title: p.title ?? '', expr: target.expr })
        walk(p.panels ?? [])
      }
    }
    walk((JSON.parse(readFileSync(file, 'utf8')) as { panels: DashboardPanel[] }).panels)
  }
  return queries
}

t.test('promtool check config: the scrape config (and the rule files it loads)', async (t) => {
  const res = promtool(['check', 'config', join(DEPLOY, 'prometheus', 'prometheus.yml')])
  t.equal(res.code, 0, res.output)
  t.match(res.output, 'SUCCESS: 1 rule files found')
})

t.test('promtool check rules: the alert rules, one per operational concern', async (t) => {
  const file = join(DEPLOY, 'prometheus', 'alerts.yml')
  const res = promtool(['check', 'rules', file])
  t.equal(res.code, 0, res.output)
  const text = readFileSync(file, 'utf8')
  const concerns: Array<[string, string]> = [
    ['error rate', 'gateway_requests_total{status=~"5.."}'],
    ['429 rate', 'gateway_ratelimit_rejections_total'],
    ['ban spikes', 'gateway_bans_total'],
    ['limiter fallback active', 'gateway_store_fallback_active'],
    ['config reload failures', 'gateway_config_reloads_total{result="failure"}'],
    ['backend latency', 'gateway_upstream_duration_seconds_bucket'],
    ['load shed (503)', 'gateway_shed_requests_total'],
    ['a rehearsed plan change (shadow limits)', 'alert: GatewayShadowLimitWouldReject'],
    ['keys expiring soon', 'alert: GatewayKeysExpiringSoon\n        expr: max(gateway_keys_expiring{within="7d"}) > 0'],
    ['consumers near their monthly quota', 'alert: GatewayQuotaNearLimit\n        expr: max by (plan) (gateway_quota_consumers_near_limit) > 0']
  ]
  for (const [concern, metric] of concerns) t.ok(text.includes(metric), `an alert on ${concern} (${metric})`)
})

t.test('the shadow alert fires for a plan whose shadow would reject over 5 % of its requests, and not for the others (promtool test rules)', async (t) => {
  const dir = t.testdir()
  // free: 100 req/min, 10 of them shadow rejections (10 %); pro: 100 req/min, 1 (1 %).
  writeFileSync(join(dir, 'shadow-test.yml'), [
    'rule_files: [' + JSON.stringify(join(DEPLOY, 'prometheus', 'alerts.yml')) + ']',
    'evaluation_interval: 1m',
    'tests:',
    '  - interval: 1m',
    '    input_series:',
    '      - { series: \'gateway_requests_total{plan="free",status="200"}\', values: "0+100x60" }',
    '      - { series: \'gateway_shadow_rejections_total{plan="free",window="minute"}\', values: "0+10x60" }',
    '      - { series: \'gateway_requests_total{plan="pro",status="200"}\', values: "0+100x60" }',
    '      - { series: \'gateway_shadow_rejections_total{plan="pro",window="minute"}\', values: "0+1x60" }',
    '    alert_rule_test:',
    '      - eval_time: 10m',
    '        alertname: GatewayShadowLimitWouldReject',
    '        exp_alerts: []',
    '      - eval_time: 40m',
    '        alertname: GatewayShadowLimitWouldReject',
    '        exp_alerts:',
    '          - exp_labels: { severity: info, plan: free }',
    '            exp_annotations:',
    '              summary: "Plan free: its shadow limits would reject 10% of its requests"',
    '              description: "The limits being rehearsed for free would answer this share of its traffic 429 once enforced (nothing is rejected for them now). See who with: petstore-gateway plans shadow free."',
    ''
  ].join('\n'))
  const res = promtool(['test', 'rules', join(dir, 'shadow-test.yml')])
  t.equal(res.code, 0, res.output)
})

t.test('the quota alert fires for a plan with a consumer above 90 % of its month for 10 minutes, once per plan however many gateways count it (promtool test rules)', async (t) => {
  const dir = t.testdir()
  // free: two gateways each count the same consumer from minute 5 on; pro: one blip of 5 minutes; business: none.
  writeFileSync(join(dir, 'quota-test.yml'), [
    'rule_files: [' + JSON.stringify(join(DEPLOY, 'prometheus', 'alerts.yml')) + ']',
    'evaluation_interval: 1m',
    'tests:',
    '  - interval: 1m',
    '    input_series:',
    '      - { series: \'gateway_quota_consumers_near_limit{plan="free",instance="a"}\', values: "0x4 1x40" }',
    '      - { series: \'gateway_quota_consumers_near_limit{plan="free",instance="b"}\', values: "0x4 1x40" }',
    '      - { series: \'gateway_quota_consumers_near_limit{plan="pro",instance="a"}\', values: "0x4 2x4 0x30" }',
    '      - { series: \'gateway_quota_consumers_near_limit{plan="business",instance="a"}\', values: "0x44" }',
    '    alert_rule_test:',
    '      - eval_time: 12m',
    '        alertname: GatewayQuotaNearLimit',
    '        exp_alerts: []',
    '      - eval_time: 20m',
    '        alertname: GatewayQuotaNearLimit',
    '        exp_alerts:',
    '          - exp_labels: { severity: info, plan: free }',
    '            exp_annotations:',
    '              summary: "Plan free: 1 consumers above 90 % of their monthly quota"',
    '              description: "They will be answered 429 quota_exceeded once it is used up (billed overage instead on a plan with overage: allow), until the month renews at 00:00 UTC on the 1st. Who: GET /admin/quotas/near-limit on a gateway admin port; one consumer: petstore-gateway keys show ID. Offer a bigger plan, or raise perMonth."',
    ''
  ].join('\n'))
  const res = promtool(['test', 'rules', join(dir, 'quota-test.yml')])
  t.equal(res.code, 0, res.output)
})

t.test('the dashboard has the quota panels: overage units and quota refusals by plan, consumers near their month', async (t) => {
  const queries = dashboardQueries()
  const overage = queries.find((q) => q.expr.includes('gateway_quota_overage_total'))
  t.match(overage?.expr, /^sum by \(plan\) \(rate\(gateway_quota_overage_total\{instance=~"\$instance"\}\[\$__rate_interval\]\)\)$/)
  const refusals = queries.find((q) => q.expr.includes('window="month"'))
  t.match(refusals?.expr, /^sum by \(plan\) \(rate\(gateway_ratelimit_rejections_total\{instance=~"\$instance",window="month"\}\[\$__rate_interval\]\)\)$/)
  t.match(refusals?.title, /quota_exceeded/)
  const near = queries.find((q) => q.expr.includes('gateway_quota_consumers_near_limit'))
  t.match(near?.expr, /^max by \(plan\) \(gateway_quota_consumers_near_limit\{instance=~"\$instance"\}\)$/)
  const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'dashboards', 'gateway.json'), 'utf8')) as { panels: Array<{ id: number, type: string, title: string, gridPos: { x: number, y: number, w: number, h: number } }> }
  const row = dashboard.panels.find((p) => p.type === 'row' && p.title === 'Quotas')
  t.ok(row, 'a Quotas row')
  const quota = dashboard.panels.filter((p) => p.gridPos.y === (row?.gridPos.y ?? -1) + 1)
  t.same(quota.map((p) => p.gridPos.x + p.gridPos.w).sort((a, b) => a - b), [10, 19, 24], 'its three panels side by side under it, filling the row')
})

t.test('the dashboard has the shadow rejections panel, by plan and window', async (t) => {
  const panel = dashboardQueries().find((q) => q.expr.includes('gateway_shadow_rejections_total'))
  t.ok(panel, 'a panel queries gateway_shadow_rejections_total')
  t.match(panel?.expr, /^sum by \(plan, window\) \(rate\(gateway_shadow_rejections_total\{instance=~"\$instance"\}\[\$__rate_interval\]\)\)$/)
  t.match(panel?.title, /^Shadow rejections per second by plan and window/)
})

t.test('every dashboard query is valid PromQL (promtool parses them as recording rules)', async (t) => {
  const queries = dashboardQueries()
  t.ok(queries.length >= 10, `${queries.length} queries`)
  const rules = queries.map((q, i) => `      - record: dashboard:query_${i}\n        expr: ${JSON.stringify(
    q.expr.replaceAll('$__rate_interval', '5m').replaceAll('$instance', '.*'))}`)
  const file = join(t.testdir(), 'dashboard-queries.yml')
  writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`)
  const res = promtool(['check', 'rules', file])
  t.equal(res.code, 0, res.output)
})

t.test('a live scrape after traffic passes promtool check metrics and holds every metric deploy/ refers to', async (t) => {
  const gw = await startGateway(t)
  const pro = bearer(DEMO_KEYS.pro)
  const traffic: Array<[string, RequestInit]> = [
    ['/v1/pets', { method: 'POST', headers: { ...pro, 'content-type': 'application/json' }, body: '{"name":"Rex","categoryId":1}' }],
    ['/v1/pets', { headers: pro }],
    ['/v1/pets/1', { headers: pro }],
    ['/v1/pets/2', { headers: bearer(DEMO_KEYS.free) }],
    ['/v1/store/orders', { headers: pro }],
    ['/v1/pets', {}],
    ['/nowhere', { headers: pro }],
    ['/v1/pets', { method: 'PUT', headers: pro }]
  ]
  for (const [path, init] of traffic) await (await fetch(`${gw.url}${path}`, init)).arrayBuffer()
  gw.app.metrics.configReloads.inc({ result: 'success' })

  const { text } = await scrape(gw.adminUrl)
  const check = promtool(['check', 'metrics'], text)
  t.equal(check.code, 0, `promtool check metrics: ${check.output}`)

  const exported = metricNames(text)
  for (const name of REQUIRED_METRICS) t.ok(exported.has(name), `exports ${name}`)
  t.match(text, /\ngateway_requests_total\{[^}]*status="201"[^}]*\} 1\n/, 'the traffic is in the scrape')

  const refs = referencedMetrics()
  t.ok([...refs.keys()].some((n) => n.startsWith('gateway_')), 'deploy/ refers to gateway metrics')
  for (const [name, files] of refs) {
    const family = name.replace(/_(bucket|sum|count)$/, '')
    t.ok(exported.has(name) || exported.has(family), `${name} (in ${[...new Set(files)].join(', ')}) is exported by the gateway`)
  }
})
