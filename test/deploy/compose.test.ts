// The compose stack (default, and staging through staging.env) wires backend, two gateways, Redis,
// Prometheus and Grafana with the app's real environment names and ports; the gateway config it
// mounts is loaded by the gateway's own loader, as production would (no demo keys).
import { existsSync, readFileSync } from 'node:fs'
import { join, posix, relative, resolve } from 'node:path'
import t from 'tap'
import { CONFIG_FILES, type ConfigTexts } from '../../src/gateway/config/loader.js'
import { DEFAULT_ADMIN_PORT, DEFAULT_GATEWAY_PORT, DEFAULT_SHUTDOWN_GRACE_MS } from '../../src/gateway/runtime/settings.js'
import { BACKEND_ENV, BACKEND_PORT, checkGatewayConfig, COMPOSE_DIR, COMPOSE_VARIANTS, composeFile, DEPLOY, GATEWAY_ENV, IMAGE_ENV, loadYaml, REDIS_PERSISTENCE, redisServerOptions, ROOT, walk, type Json } from '../helpers/deploy.js'

for (const [variant, { vars, configDir }] of Object.entries(COMPOSE_VARIANTS)) t.test(`compose (${variant}): backend, two gateways on one Redis, Prometheus, Grafana, live config volume`, async (t) => {
  const compose = composeFile(vars)
  const services = compose.services as Record<string, Json>
  // Services of an optional profile (`tracing`: test/deploy/tracing.test.ts) start only when asked for.
  t.same(Object.keys(services).filter((name) => services[name]?.profiles === undefined).sort(), ['backend', 'gateway-1', 'gateway-2', 'grafana', 'prometheus', 'redis'], 'services')

  const appServices = ['backend', 'gateway-1', 'gateway-2']
  for (const name of appServices) {
    const s = services[name] as Json
    t.equal(resolve(COMPOSE_DIR, s.build?.context ?? '.'), ROOT, `${name}: built from the repository root`)
    t.ok(existsSync(join(ROOT, s.build?.dockerfile ?? 'Dockerfile')), `${name}: its Dockerfile exists`)
    t.equal(s.image, services.backend?.image, `${name}: one image for both roles`)
    t.equal(s.environment?.NODE_ENV, 'production', `${name}: NODE_ENV=production`)
    t.ok(Array.isArray(s.command), `${name}: command in exec form`)
    t.notOk(s.healthcheck?.disable, `${name}: keeps the image HEALTHCHECK`)
    t.equal(s.read_only, true, `${name}: read-only root filesystem`)
  }
  const redisUrl = new URL(services['gateway-1']?.environment?.REDIS_URL as string)
  t.ok(services[redisUrl.hostname], `REDIS_URL points at the compose service "${redisUrl.hostname}"`)
  t.ok(Array.isArray(services.redis?.healthcheck?.test), 'redis has a healthcheck')
  // Month quotas and overage are billed from Redis: it keeps them across its restart (AOF on a volume).
  const redisOptions = redisServerOptions(services.redis?.command as string[])
  for (const [name, value] of Object.entries(REDIS_PERSISTENCE)) t.equal(redisOptions.get(name), value, `redis: ${name} ${value}`)
  const redisData = (services.redis?.volumes as Json[] | undefined ?? []).find((v) => v.target === redisOptions.get('dir'))
  t.equal(redisData?.type, 'volume', `redis: its dir (${redisOptions.get('dir')}) is a named volume, kept when the container is replaced`)
  t.ok(compose.volumes && redisData?.source in compose.volumes, 'that volume is declared')

  // backend
  const backend = services.backend as Json
  t.same(backend.command, ['node', 'dist/backend/server.js'], 'backend role by command')
  t.equal(backend.environment.BACKEND_HOST, '0.0.0.0', 'backend listens beyond loopback inside its container')
  t.equal(Number(backend.environment.BACKEND_PORT), BACKEND_PORT, 'backend port')
  for (const name of Object.keys(backend.environment)) {
    t.ok(BACKEND_ENV.has(name) || IMAGE_ENV.has(name), `backend env ${name} is read by the backend or the image`)
  }
  t.equal(new URL(backend.environment.HEALTHCHECK_URL).port, String(BACKEND_PORT), 'backend healthcheck calls the backend port')
  t.notOk(backend.ports, 'backend is not published to the host')
  const dataMount = (backend.volumes as Json[]).find((v) => v.target === posix.dirname(backend.environment.PETS_DB))
  t.equal(dataMount?.type, 'volume', 'PETS_DB lives on a named volume')
  t.ok(compose.volumes && dataMount?.source in compose.volumes, 'that volume is declared')

  // gateways
  const hostPorts = new Set<string>()
  for (const name of ['gateway-1', 'gateway-2']) {
    const g = services[name] as Json
    const env = g.environment as Record<string, string>
    t.same(g.command, ['node', 'dist/gateway/server.js'], `${name}: gateway role by command`)
    for (const key of Object.keys(env)) t.ok(GATEWAY_ENV.has(key), `${name}: env ${key} is read by the gateway`)
    t.equal(env.ADMIN_HOST, '0.0.0.0', `${name}: admin port reachable by Prometheus`)
    const backendUrl = new URL(env.BACKEND_URL as string)
    t.equal(backendUrl.hostname, 'backend', `${name}: BACKEND_URL names the backend service`)
    t.equal(Number(backendUrl.port), Number(backend.environment.BACKEND_PORT), `${name}: BACKEND_URL uses the backend's port`)
    t.equal(env.REDIS_URL, services['gateway-1']?.environment?.REDIS_URL, `${name}: same Redis as the other gateway`)
    const ports = (g.ports as string[]).map((p) => p.split(':'))
    t.ok(ports.every((p) => p.length === 3 && p[0] === '127.0.0.1'), `${name}: published on loopback only`)
    t.ok(ports.every((p) => Number(p[2]) === Number(env.GATEWAY_PORT ?? DEFAULT_GATEWAY_PORT)), `${name}: publishes GATEWAY_PORT`)
    t.notOk(ports.some((p) => Number(p[2]) === Number(env.ADMIN_PORT ?? DEFAULT_ADMIN_PORT)), `${name}: admin port not published`)
    for (const p of ports) hostPorts.add(p[1] as string)
    const graceMs = Number(env.SHUTDOWN_GRACE_MS ?? DEFAULT_SHUTDOWN_GRACE_MS)
    const stopMs = Number(/^(\d+)s$/.exec(g.stop_grace_period as string)?.[1]) * 1000
    t.ok(stopMs > graceMs, `${name}: stop_grace_period (${stopMs} ms) exceeds the drain (${graceMs} ms)`)
    t.equal(g.depends_on?.redis?.condition, 'service_healthy', `${name}: waits for Redis`)
    t.equal(g.depends_on?.backend?.condition, 'service_healthy', `${name}: waits for the backend`)
    const config = (g.volumes as Json[]).find((v) => v.target === env.CONFIG_DIR)
    t.equal(config?.type, 'bind', `${name}: CONFIG_DIR is a bind-mounted directory (edits reload live)`)
    t.equal(resolve(COMPOSE_DIR, config?.source ?? ''), configDir, `${name}: mounts deploy/compose/${relative(COMPOSE_DIR, configDir)}`)
  }
  t.equal(hostPorts.size, 2, 'the two gateways publish different host ports')

  const texts = Object.fromEntries(CONFIG_FILES.map((f) => [f, readFileSync(join(configDir, f), 'utf8')])) as ConfigTexts
  checkGatewayConfig(t, texts, relative(ROOT, configDir))

  // Prometheus and Grafana
  const prometheus = services.prometheus as Json
  const promConfig = (prometheus.volumes as Json[]).find((v) => v.target === '/etc/prometheus')
  t.equal(resolve(COMPOSE_DIR, promConfig?.source ?? ''), join(DEPLOY, 'prometheus'), 'Prometheus mounts deploy/prometheus')
  t.ok((prometheus.command as string[]).includes('--config.file=/etc/prometheus/prometheus.yml'), 'Prometheus reads prometheus.yml from it')
  const grafana = services.grafana as Json
  const grafanaMounts = new Map((grafana.volumes as Json[]).map((v) => [v.target as string, resolve(COMPOSE_DIR, v.source as string)]))
  t.equal(grafanaMounts.get('/etc/grafana/provisioning'), join(COMPOSE_DIR, 'grafana', 'provisioning'), 'Grafana provisioning from deploy/compose/grafana')
  const [datasources] = loadYaml(join(COMPOSE_DIR, 'grafana/provisioning/datasources/prometheus.yml')) as [Json]
  t.equal(new URL(datasources.datasources[0].url).hostname, 'prometheus', 'the data source is the compose Prometheus')
  const [providers] = loadYaml(join(COMPOSE_DIR, 'grafana/provisioning/dashboards/petstore.yml')) as [Json]
  const dashboardsPath = providers.providers[0].options.path as string
  t.equal(grafanaMounts.get(dashboardsPath), join(DEPLOY, 'grafana'), 'the dashboard provider reads deploy/grafana')
})

t.test('compose staging: a stack of its own beside the default one, same plans and routes, own keys', async (t) => {
  const [plain, staging] = [composeFile(COMPOSE_VARIANTS.default.vars), composeFile(COMPOSE_VARIANTS.staging.vars)]
  const published = (c: Json): string[] => Object.values(c.services as Record<string, Json>).flatMap((s) => (s.ports as string[] | undefined ?? []).map((p) => p.split(':')[1] as string))
  t.same(published(staging).filter((p) => published(plain).includes(p)), [], 'no host port in common: both stacks can run at once')
  t.equal(COMPOSE_VARIANTS.staging.vars.COMPOSE_PROJECT_NAME, 'petstore-staging', 'its own project (containers, network, volumes)')
  t.not(plain.name, COMPOSE_VARIANTS.staging.vars.COMPOSE_PROJECT_NAME)
  const env = (staging.services as Record<string, Json>)['gateway-1']?.environment as Record<string, string>
  t.equal(env.LOG_LEVEL, 'debug')
  t.ok(env.STAGING_BASE_URL !== '' && env.PUBLIC_BASE_URL !== '', 'both servers in its OpenAPI document')
  t.equal(((plain.services as Record<string, Json>)['gateway-1']?.environment as Record<string, string>).STAGING_BASE_URL, '', 'unset in the default stack')
  for (const file of ['plans.yaml', 'routes.yaml']) {
    t.equal(readFileSync(join(COMPOSE_DIR, 'config-staging', file), 'utf8'), readFileSync(join(COMPOSE_DIR, 'config', file), 'utf8'), `config-staging/${file} is config/${file}`)
  }
  for (const name of Object.keys(COMPOSE_VARIANTS.staging.vars)) {
    t.ok(name === 'COMPOSE_PROJECT_NAME' || readFileSync(join(COMPOSE_DIR, 'docker-compose.yml'), 'utf8').includes(`\${${name}:-`), `staging.env's ${name} is used by docker-compose.yml`)
  }
})

// deploy/prometheus and deploy/grafana belong to the metrics work; the compose stack only mounts them.
// What the stack needs from them: a prometheus.yml that scrapes both gateways' admin ports by their
// compose names, and dashboards that use the provisioned data source.
const PROMETHEUS_FILE = join(DEPLOY, 'prometheus', 'prometheus.yml')
t.test('compose: the mounted Prometheus config scrapes both gateways, dashboards use the data source', async (t) => {
  // The compose stack mounts it: its absence is a broken stack, not a reason to skip.
  t.ok(existsSync(PROMETHEUS_FILE), 'deploy/prometheus/prometheus.yml exists')
  const text = existsSync(PROMETHEUS_FILE) ? readFileSync(PROMETHEUS_FILE, 'utf8') : ''
  for (const target of ['gateway-1', 'gateway-2']) {
    t.match(text, new RegExp(`\\b${target}:${DEFAULT_ADMIN_PORT}\\b`), `prometheus.yml scrapes ${target}:${DEFAULT_ADMIN_PORT}`)
  }
  const dashboards = walk(join(DEPLOY, 'grafana')).filter((p) => p.endsWith('.json'))
  t.ok(dashboards.length > 0, 'deploy/grafana holds a dashboard')
  for (const file of dashboards) {
    const uids = [...readFileSync(file, 'utf8').matchAll(/"datasource"\s*:\s*\{[^}]*"uid"\s*:\s*"([^"]+)"/g)].map((m) => m[1])
    t.ok(uids.every((uid) => uid === 'prometheus' || uid === '-- Grafana --' || uid?.startsWith('$')), `${relative(ROOT, file)}: data source uid "prometheus" (or a variable)`)
  }
})
