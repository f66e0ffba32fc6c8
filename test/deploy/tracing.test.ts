// What the deployment ships for traces (docs/tracing.md), without Docker or a cluster: the compose
// stack's optional `tracing` profile (the OpenTelemetry Collector and Jaeger, the collector's committed
// config, every service pointed at the collector only through tracing.env, tracing off otherwise), and
// in Kubernetes the endpoint, sampling and trust from one ConfigMap that both workloads read and each
// overlay overrides — every value checked by the services' own settings parser, as they would start.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, parseAllDocuments } from 'yaml'
import { settingsFromEnv } from '../../src/gateway/runtime/settings.js'
import { tracingSettingsFromEnv } from '../../src/shared/tracing/settings.js'
import { kustomize, type Json as Manifest } from '../helpers/deploy.js'

const DEPLOY = join(import.meta.dirname, '..', '..', 'deploy')
const COMPOSE_DIR = join(DEPLOY, 'compose')
const APP_SERVICES = ['backend', 'gateway-1', 'gateway-2']
const COLLECTOR_OTLP_HTTP_PORT = 4318

type Env = Record<string, string>

/** KEY=value lines of an --env-file. */
function envFileVars (name: string): Env {
  const lines = readFileSync(join(COMPOSE_DIR, name), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  return Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]))
}

/** docker-compose.yml with `${VAR:-default}` resolved from `vars`, as `docker compose --env-file` would. */
function stack (vars: Env): Manifest {
  const text = readFileSync(join(COMPOSE_DIR, 'docker-compose.yml'), 'utf8')
    .replace(/\$\{([A-Z0-9_]+)(?::-([^}]*))?\}/g, (_all, name: string, fallback: string | undefined) => vars[name] ?? fallback ?? '')
  return parseAllDocuments(text, { merge: true })[0]?.toJS() as Manifest
}

/** Services that `docker compose up` starts with these COMPOSE_PROFILES. */
function started (compose: Manifest, profiles: string | undefined): string[] {
  const active = new Set((profiles ?? '').split(',').filter((p) => p !== ''))
  return Object.entries(compose.services as Record<string, Manifest>)
    .filter(([, s]) => s.profiles === undefined || (s.profiles as string[]).some((p) => active.has(p)))
    .map(([name]) => name).sort()
}

t.test('compose without tracing.env: the profile\'s services stay down and every service has tracing off', async (t) => {
  const compose = stack({})
  t.notOk(started(compose, undefined).some((s) => s === 'otel-collector' || s === 'jaeger'), 'no collector, no Jaeger')
  for (const name of APP_SERVICES) {
    const env = compose.services[name].environment as Env
    t.equal(tracingSettingsFromEnv(env, name).tracesUrl, undefined, `${name}: tracing off`)
  }
})

t.test('compose with tracing.env: collector and Jaeger start, every service exports to the collector\'s OTLP/HTTP port', async (t) => {
  const vars = envFileVars('tracing.env')
  const compose = stack(vars)
  const services = compose.services as Record<string, Manifest>
  t.same(started(compose, vars.COMPOSE_PROFILES).filter((s) => s === 'otel-collector' || s === 'jaeger'), ['jaeger', 'otel-collector'], 'COMPOSE_PROFILES=tracing starts both')
  for (const name of Object.keys(vars)) {
    t.ok(name === 'COMPOSE_PROFILES' || readFileSync(join(COMPOSE_DIR, 'docker-compose.yml'), 'utf8').includes(`\${${name}:-`), `tracing.env's ${name} is used by docker-compose.yml`)
  }

  const collector = services['otel-collector'] as Manifest
  t.match(collector.image, /^otel\/opentelemetry-collector(-contrib)?:\d+\.\d+\.\d+$/, 'the OpenTelemetry Collector, pinned')
  const configArg = (collector.command as string[]).find((a) => a.startsWith('--config='))?.slice('--config='.length)
  const mount = (collector.volumes as Manifest[]).find((v) => v.target === configArg)
  t.equal(mount?.read_only, true, 'its config is mounted read-only where --config points')
  const config = parse(readFileSync(join(COMPOSE_DIR, mount?.source as string), 'utf8')) as Manifest
  t.equal(config.receivers.otlp.protocols.http.endpoint, `0.0.0.0:${COLLECTOR_OTLP_HTTP_PORT}`, 'it receives OTLP/HTTP on 4318')
  const pipeline = config.service.pipelines.traces as Manifest
  t.same(pipeline.receivers, ['otlp'])
  t.equal(pipeline.processors[0], 'memory_limiter', 'memory_limiter first')
  for (const p of pipeline.processors as string[]) t.ok(p in config.processors, `processor ${p} is defined`)
  const [exporter] = pipeline.exporters as string[]
  const target = new URL(`http://${config.exporters[exporter as string].endpoint as string}`)
  const jaeger = services[target.hostname] as Manifest
  t.match(jaeger?.image, /^jaegertracing\/all-in-one:\d+\.\d+\.\d+$/, `it exports to the compose service ${target.hostname}: Jaeger all-in-one, pinned`)
  t.equal(target.port, '4317', 'on Jaeger\'s OTLP/gRPC port')
  t.equal(jaeger.environment?.COLLECTOR_OTLP_ENABLED, 'true')
  t.same((jaeger.ports as string[]).map((p) => p.split(':').slice(0, 1)), [['127.0.0.1']], 'the UI published on loopback only')
  t.equal((jaeger.ports as string[])[0]?.split(':')[2], '16686', 'the Jaeger UI port')
  t.notOk(collector.ports, 'the collector is not published to the host')

  for (const name of APP_SERVICES) {
    const env = services[name]?.environment as Env
    const settings = tracingSettingsFromEnv(env, 'x')
    const url = new URL(settings.tracesUrl ?? 'http://unset')
    t.equal(url.hostname, 'otel-collector', `${name}: exports to the collector service`)
    t.equal(Number(url.port), COLLECTOR_OTLP_HTTP_PORT, `${name}: on its OTLP/HTTP port`)
    t.equal(settings.serviceName, name === 'backend' ? 'petstore-backend' : 'petstore-gateway', `${name}: its service name`)
  }
  t.equal(tracingSettingsFromEnv(services['gateway-1']?.environment as Env, 'x').samplerRatio, 1, 'the local stack samples every trace')
})

t.test('compose staging with tracing: the Jaeger UI port does not collide with the default stack\'s', async (t) => {
  const ports = (vars: Env): string | undefined => (stack(vars).services.jaeger.ports as string[])[0]?.split(':')[1]
  t.not(ports({ ...envFileVars('staging.env'), ...envFileVars('tracing.env') }), ports(envFileVars('tracing.env')))
})

// ---------------------------------------------------------------------------------------------
// Kubernetes

function containerEnv (docs: Manifest[], deployment: string): Env {
  const d = docs.find((x) => x.kind === 'Deployment' && x.metadata.name === deployment) as Manifest
  const c = d.spec.template.spec.containers[0] as Manifest
  const fromMaps = (c.envFrom as Manifest[] | undefined ?? []).flatMap((e) => {
    const map = docs.find((x) => x.kind === 'ConfigMap' && x.metadata.name === e.configMapRef?.name)
    if (map === undefined) throw new Error(`${deployment}: envFrom names a ConfigMap that is not rendered: ${String(e.configMapRef?.name)}`)
    return Object.entries(map.data as Env)
  })
  const own = (c.env as Manifest[]).filter((e) => typeof e.value === 'string').map((e) => [e.name as string, e.value as string])
  // A container's own env wins over envFrom, as in Kubernetes.
  return Object.fromEntries([...fromMaps, ...own])
}

const EXPECTED: Record<string, { url: string | undefined, ratio: number }> = {
  base: { url: undefined, ratio: 0.01 },
  'overlays/staging': { url: 'http://otel-collector.observability.svc:4318/v1/traces', ratio: 1 },
  'overlays/production': { url: 'http://otel-collector.observability.svc:4318/v1/traces', ratio: 0.01 }
}

for (const [which, expected] of Object.entries(EXPECTED)) {
  t.test(`k8s ${which}: both workloads read the tracing ConfigMap, and start with it`, async (t) => {
    const docs = kustomize(join(DEPLOY, 'k8s', which))
    const gateway = containerEnv(docs, 'petstore-gateway')
    const backend = containerEnv(docs, 'petstore-backend')
    for (const [name, env, service] of [['gateway', gateway, 'petstore-gateway'], ['backend', backend, 'petstore-backend']] as const) {
      const settings = tracingSettingsFromEnv(env, 'unset')
      t.equal(settings.tracesUrl, expected.url, `${name}: endpoint`)
      t.equal(settings.sampler, 'parentbased_traceidratio', `${name}: parent-based ratio sampling`)
      t.equal(settings.samplerRatio, expected.ratio, `${name}: ratio`)
      t.equal(settings.serviceName, service, `${name}: service name`)
    }
    t.equal(gateway.OTEL_EXPORTER_OTLP_ENDPOINT, backend.OTEL_EXPORTER_OTLP_ENDPOINT, 'one collector for both')
    t.equal(settingsFromEnv(gateway).traceIncoming, 'restart', 'internet clients: traces restart at the edge')
    if (which !== 'base') t.match(gateway.OTEL_RESOURCE_ATTRIBUTES, `deployment.environment.name=${which.split('/')[1] as string}`, 'spans say which environment')
  })
}
