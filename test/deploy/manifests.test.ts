// Checks of everything the deployment ships, without a Docker engine or a cluster: every YAML under
// deploy/ parses; the Dockerfile has the shape the image needs (multi-stage, production deps only,
// non-root, NODE_ENV=production, HEALTHCHECK on the admin port, tini + exec-form CMD for both
// roles); the compose stack (default, and staging through staging.env) wires backend, two gateways,
// Redis, Prometheus and Grafana with the app's real environment names and ports; the Kubernetes
// base and each overlay (staging, production), rendered as `kubectl kustomize` would by
// test/helpers/kustomize.ts (no kubectl needed), pass the Kubernetes 1.27 and
// Prometheus Operator JSON schemas bundled in `kubernetes-models` (offline), with unknown fields
// refused, and carry the probes, resources, security context, drain budget and policies we rely
// on. The gateway config shipped in compose and in the ConfigMap is loaded by the gateway's own
// loader, as production would (no demo keys).
import t, { type Test } from 'tap'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, posix, relative, resolve } from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import Fastify from 'fastify'
import { parseAllDocuments } from 'yaml'
import { validate as validateNamespace } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Namespace'
import { validate as validateConfigMap } from 'kubernetes-models/_schemas/IoK8sApiCoreV1ConfigMap'
import { validate as validateSecret } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Secret'
import { validate as validateService } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Service'
import { validate as validatePvc } from 'kubernetes-models/_schemas/IoK8sApiCoreV1PersistentVolumeClaim'
import { validate as validateDeployment } from 'kubernetes-models/_schemas/IoK8sApiAppsV1Deployment'
import { validate as validateHpa } from 'kubernetes-models/_schemas/IoK8sApiAutoscalingV2HorizontalPodAutoscaler'
import { validate as validatePdb } from 'kubernetes-models/_schemas/IoK8sApiPolicyV1PodDisruptionBudget'
import { validate as validateNetworkPolicy } from 'kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicy'
import { validate as validateIngress } from 'kubernetes-models/_schemas/IoK8sApiNetworkingV1Ingress'
import { buildAdmin } from '../../src/gateway/admin/app.js'
import { ReadinessRegistry } from '../../src/gateway/runtime/readiness.js'
import { assertNoDemoKeys } from '../../src/gateway/config/demo-keys.js'
import { CONFIG_FILES, parseConfig, type ConfigTexts } from '../../src/gateway/config/loader.js'
import { DEFAULT_ADMIN_PORT, DEFAULT_GATEWAY_PORT, DEFAULT_SHUTDOWN_GRACE_MS, settingsFromEnv } from '../../src/gateway/runtime/settings.js'
import { renderKustomization, strategicMerge } from '../helpers/kustomize.js'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
const DEPLOY = join(ROOT, 'deploy')
const COMPOSE_DIR = join(DEPLOY, 'compose')
const K8S_DIR = join(DEPLOY, 'k8s')
/** Backend defaults (docs/decisions.md, Configuration); src/backend/server.ts keeps them private because importing it starts a server. */
const BACKEND_PORT = 3001

type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

// ---------------------------------------------------------------------------------------------
// Sources of truth read from the application itself

/** Environment names the gateway reads (settings.ts) and the backend reads (backend/server.ts); both read the tracing ones. */
const TRACING_ENV = [...readFileSync(join(ROOT, 'src/shared/tracing/settings.ts'), 'utf8').matchAll(/\(env, '([A-Z_]+)'/g)].map((m) => m[1] as string)
const GATEWAY_ENV = new Set([
  ...[...readFileSync(join(ROOT, 'src/gateway/runtime/settings.ts'), 'utf8').matchAll(/\(env, '([A-Z_]+)'/g)].map((m) => m[1] as string),
  ...TRACING_ENV,
  'NODE_ENV'
])
const BACKEND_ENV = new Set([
  ...[...readFileSync(join(ROOT, 'src/backend/server.ts'), 'utf8').matchAll(/process\.env\.([A-Z_]+)/g)].map((m) => m[1] as string),
  ...TRACING_ENV,
  'NODE_ENV'
])
/** Read by the image's HEALTHCHECK, not by the app. */
const IMAGE_ENV = new Set(['HEALTHCHECK_URL'])

function walk (dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })
}

function loadYaml (path: string): Json[] {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'), { merge: true })
  if (!Array.isArray(docs)) return [] // an empty file
  for (const doc of docs) {
    const problems = [...doc.errors, ...doc.warnings].map((e) => e.message)
    if (problems.length > 0) throw new Error(`${relative(ROOT, path)}: ${problems.join('; ')}`)
  }
  return docs.map((doc) => doc.toJS() as Json).filter((value) => value !== null && value !== undefined)
}

/** The gateway's own loader on a config directory's texts, as a production process would run it. */
function checkGatewayConfig (t: Test, texts: ConfigTexts, where: string): void {
  let problems: readonly string[] = []
  try {
    assertNoDemoKeys(parseConfig(texts))
  } catch (err) {
    problems = (err as { problems?: readonly string[] }).problems ?? [String(err)]
  }
  t.same(problems, [], `${where}: loads with NODE_ENV=production`)
}

function envOf (container: Json): Map<string, Json> {
  return new Map((container.env as Json[] | undefined ?? []).map((e) => [e.name as string, e]))
}

function envValue (container: Json, name: string): string | undefined {
  return envOf(container).get(name)?.value as string | undefined
}

// ---------------------------------------------------------------------------------------------
// Every YAML under deploy/

t.test('every YAML file under deploy/ parses (all documents, no duplicate keys)', async (t) => {
  const files = walk(DEPLOY).filter((p) => /\.ya?ml$/.test(p))
  t.ok(files.length >= 10, `found ${files.length} YAML files`)
  for (const file of files) {
    t.doesNotThrow(() => loadYaml(file), relative(ROOT, file))
  }
})

// ---------------------------------------------------------------------------------------------
// Dockerfile

interface Instruction { keyword: string, args: string, line: number }
interface Stage { image: string, name: string | undefined, instructions: Instruction[] }

function parseDockerfile (text: string): { globalArgs: Map<string, string>, stages: Stage[] } {
  const instructions: Instruction[] = []
  let pending = ''
  let startLine = 0
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim()
    if (line.startsWith('#') || (line === '' && pending === '')) return
    if (pending === '') startLine = i + 1
    if (line.endsWith('\\')) { pending += line.slice(0, -1) + ' '; return }
    const full = (pending + line).trim()
    pending = ''
    const m = /^(\w+)\s+([\s\S]*)$/.exec(full)
    if (m !== null) instructions.push({ keyword: (m[1] as string).toUpperCase(), args: m[2] as string, line: startLine })
  })
  const globalArgs = new Map<string, string>()
  const stages: Stage[] = []
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args)
      const image = (m?.[1] ?? ins.args).replace(/\$\{(\w+)\}/g, (_all, name: string) => globalArgs.get(name) ?? '')
      stages.push({ image, name: m?.[2], instructions: [] })
    } else if (stages.length === 0 && ins.keyword === 'ARG') {
      const [name, value] = ins.args.split('=')
      globalArgs.set(name as string, value ?? '')
    } else {
      stages.at(-1)?.instructions.push(ins)
    }
  }
  return { globalArgs, stages }
}

/** The exec (JSON) form of CMD / ENTRYPOINT / HEALTHCHECK CMD, or undefined for the shell form. */
function execForm (args: string): string[] | undefined {
  try {
    const value: unknown = JSON.parse(args)
    return Array.isArray(value) && value.every((v) => typeof v === 'string') ? value : undefined
  } catch {
    return undefined
  }
}

/** A .dockerignore pattern against a context path; excluding a directory excludes what it holds. */
function dockerignoreMatches (pattern: string, path: string): boolean {
  const regex = new RegExp('^' + pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*\*\/?/g, '§').replace(/\*/g, '[^/]*')
    .replace(/\?/g, '[^/]').replace(/§/g, '(.*/)?') + '(/.*)?$')
  return regex.test(path)
}

t.test('Dockerfile: multi-stage, production deps only, non-root, signals, healthcheck, both roles', async (t) => {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
  const { stages } = parseDockerfile(text)
  const runtime = stages.at(-1) as Stage
  const named = new Map(stages.filter((s) => s.name !== undefined).map((s) => [s.name as string, s]))
  const all = (stage: Stage, keyword: string): Instruction[] => stage.instructions.filter((i) => i.keyword === keyword)
  /** A stage's RUN lines including those of the stages it is built FROM. */
  const runsOf = (stage: Stage): string => {
    const parent = named.get(stage.image)
    return (parent === undefined ? '' : runsOf(parent) + '\n') + all(stage, 'RUN').map((i) => i.args).join('\n')
  }

  t.ok(stages.length >= 3, 'several stages')
  t.ok(stages.slice(0, -1).every((s) => s.name !== undefined), 'every stage but the last is named (FROM ... AS name)')
  t.match(runtime.image, /^node:22[\w.-]*-slim$/, 'runtime stage is a slim Node 22 image')
  const engines = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Json).engines.node as string
  t.equal(engines, '>=22.13', 'package.json engines: Node 22.13 (node:sqlite unflagged) or later')
  t.equal(readFileSync(join(ROOT, '.nvmrc'), 'utf8').trim(), '22', '.nvmrc names the same major')
  const baseImage = (stage: Stage): string => { const parent = named.get(stage.image); return parent === undefined ? stage.image : baseImage(parent) }
  for (const stage of stages) t.match(baseImage(stage), /^node:22-bookworm(-slim)?$/, `stage ${stage.name ?? 'runtime'} is on Node 22 (${baseImage(stage)})`)

  const build = stages.find((s) => /\bnpm ci\b(?![^\n]*--omit=dev)/.test(runsOf(s)) && /npm run build/.test(runsOf(s)))
  t.ok(build, 'a build stage installs all dependencies (npm ci) and runs npm run build')
  const prodDeps = stages.find((s) => /npm ci --omit=dev/.test(runsOf(s)))
  t.ok(prodDeps, 'a stage installs production dependencies only (npm ci --omit=dev)')
  t.match(runsOf(prodDeps as Stage), /--omit=optional/, 'without the Node binary npm ci brings for older machines: the image has its own Node 22')
  t.match(runsOf(prodDeps as Stage), /require\('node:sqlite'\)/, 'and checks that the image\'s Node has node:sqlite, failing the build if not')
  t.notMatch(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'), /better-sqlite3|g\+\+|python3/, 'no native addon, so no compiler in any stage')
  t.notMatch(all(runtime, 'RUN').map((i) => i.args).join('\n'), /npm (ci|install)|g\+\+|python3/, 'runtime stage installs no packages with npm and no compilers')

  const copies = all(runtime, 'COPY').map((i) => i.args)
  t.ok(copies.some((c) => c.includes(`--from=${prodDeps?.name}`) && /\/app\/node_modules/.test(c)), 'runtime takes node_modules from the production-deps stage')
  t.ok(copies.some((c) => c.includes(`--from=${build?.name}`) && /\/app\/dist/.test(c)), 'runtime takes dist/ from the build stage')
  t.ok(copies.some((c) => /\bpackage\.json\b/.test(c) && !c.includes('--from')), 'runtime has package.json ("type": "module" for dist/)')
  // tsc emits only JavaScript: every other file under src/ (read at run time) must be copied to dist/.
  const assets = new Set(walk(join(ROOT, 'src')).filter((p) => !p.endsWith('.ts')).map((p) => p.slice(p.lastIndexOf('.'))))
  for (const ext of assets) {
    t.ok(runsOf(build as Stage).includes(`'*${ext}'`), `the build copies src/**/*${ext} beside the compiled code`)
  }

  const env = all(runtime, 'ENV').map((i) => i.args).join(' ')
  t.match(env, /\bNODE_ENV=production\b/, 'NODE_ENV=production')
  t.match(env, new RegExp(`\\bGATEWAY_PORT=${DEFAULT_GATEWAY_PORT}\\b`), 'GATEWAY_PORT is the app default')
  t.match(env, new RegExp(`\\bADMIN_PORT=${DEFAULT_ADMIN_PORT}\\b`), 'ADMIN_PORT is the app default')
  for (const [, name] of env.matchAll(/\b([A-Z_]+)=/g)) {
    t.ok(GATEWAY_ENV.has(name as string) || BACKEND_ENV.has(name as string), `ENV ${name} is read by the app`)
  }

  const user = all(runtime, 'USER').at(-1)?.args
  t.ok(user !== undefined && user !== '' && !/^(root|0)(:|$)/.test(user), `runtime USER is not root (${user})`)
  t.match(user, /^[1-9]\d*(:\d+)?$/, 'USER is numeric, so Kubernetes can verify runAsNonRoot')

  const entrypoint = execForm(all(runtime, 'ENTRYPOINT').at(-1)?.args ?? '')
  const cmd = execForm(all(runtime, 'CMD').at(-1)?.args ?? '')
  t.same(entrypoint, ['/usr/bin/tini', '--'], 'ENTRYPOINT is tini in exec form (PID 1 forwards SIGTERM, reaps zombies)')
  t.match(runsOf(runtime), /apt-get install[^\n]*\btini\b/, 'tini is installed in the runtime stage')
  t.same(cmd, ['node', 'dist/gateway/server.js'], 'CMD is the gateway role, exec form: node receives SIGTERM itself (no shell, no npm)')
  t.match(text, /node dist\/backend\/server\.js/, 'the backend role (same image, other command) is documented')
  for (const role of ['gateway', 'backend']) {
    t.ok(existsSync(join(ROOT, 'src', role, 'server.ts')), `src/${role}/server.ts exists (→ dist/${role}/server.js)`)
  }
  const buildConfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as Json
  t.same([buildConfig.compilerOptions.rootDir, buildConfig.compilerOptions.outDir], ['src', 'dist'], 'tsc maps src/ to dist/')

  const healthcheck = all(runtime, 'HEALTHCHECK').at(-1)?.args ?? ''
  const probe = execForm(healthcheck.replace(/^(--\S+\s+)*CMD\s+/, ''))
  t.ok(probe !== undefined && probe[0] === 'node', 'HEALTHCHECK runs node in exec form (no curl in a slim image)')
  t.match(probe?.join(' '), /ADMIN_PORT \|\| 9091[\s\S]*\/healthz/, 'HEALTHCHECK calls /healthz on the admin port (ADMIN_PORT, default 9091)')
  t.equal(DEFAULT_ADMIN_PORT, 9091, 'the admin port default the HEALTHCHECK falls back to is the app default')

  const exposed = all(runtime, 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map(Number).sort()
  t.same(exposed, [BACKEND_PORT, DEFAULT_GATEWAY_PORT, DEFAULT_ADMIN_PORT].sort(), 'EXPOSE gateway, admin and backend ports')

  // Every COPY source from the build context exists and is not excluded by .dockerignore.
  const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  for (const needed of ['**/node_modules', 'dist', '.git', 'data', '**/.env', 'coverage', 'test']) {
    t.ok(ignore.includes(needed), `.dockerignore excludes ${needed}`)
  }
  const sources = stages.flatMap((s) => all(s, 'COPY')).filter((i) => !i.args.includes('--from'))
    .flatMap((i) => i.args.split(/\s+/).filter((a) => !a.startsWith('--')).slice(0, -1))
  t.ok(sources.length > 0, 'COPY from the context')
  for (const source of sources) {
    t.ok(existsSync(join(ROOT, source)), `COPY source ${source} exists`)
    const excluded = ignore.some((p) => !p.startsWith('!') && dockerignoreMatches(p, source))
    t.notOk(excluded, `COPY source ${source} is not excluded by .dockerignore`)
  }
})

// ---------------------------------------------------------------------------------------------
// docker compose

/** `${VAR}` and `${VAR:-default}` as docker compose interpolates them. */
function interpolate (text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{([A-Z0-9_]+)(?::-([^}]*))?\}/g, (_all, name: string, fallback: string | undefined) => vars[name] ?? fallback ?? '')
}

/** KEY=value lines of a compose --env-file. */
function envFile (path: string): Record<string, string> {
  return Object.fromEntries(readFileSync(path, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]))
}

const COMPOSE_VARIANTS = {
  default: { vars: {} as Record<string, string>, configDir: join(COMPOSE_DIR, 'config') },
  staging: { vars: envFile(join(COMPOSE_DIR, 'staging.env')), configDir: join(COMPOSE_DIR, 'config-staging') }
}

function composeFile (vars: Record<string, string>): Json {
  const file = join(COMPOSE_DIR, 'docker-compose.yml')
  const docs = parseAllDocuments(interpolate(readFileSync(file, 'utf8'), vars), { merge: true })
  if (!Array.isArray(docs) || docs.length !== 1) throw new Error('docker-compose.yml: one document expected')
  return (docs[0] as { toJS: () => Json }).toJS()
}

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

// ---------------------------------------------------------------------------------------------
// Kubernetes

type Validate = (data: unknown) => boolean
// The operator package exports its models but not their compiled schemas; load the schema file itself.
const operatorDir = dirname(createRequire(import.meta.url).resolve('@kubernetes-models/prometheus-operator/package.json'))
const { validate: validateServiceMonitor } = await import(pathToFileURL(join(operatorDir,
  '_schemas/ComGithubPrometheusOperatorPrometheusOperatorPkgApisMonitoringV1ServiceMonitor.js')).href) as { validate: Validate }
interface SchemaError { instancePath: string, keyword: string, params: unknown }
const SCHEMAS: Record<string, Validate> = {
  'v1/Namespace': validateNamespace,
  'v1/ConfigMap': validateConfigMap,
  'v1/Secret': validateSecret,
  'v1/Service': validateService,
  'v1/PersistentVolumeClaim': validatePvc,
  'apps/v1/Deployment': validateDeployment,
  'autoscaling/v2/HorizontalPodAutoscaler': validateHpa,
  'policy/v1/PodDisruptionBudget': validatePdb,
  'networking.k8s.io/v1/NetworkPolicy': validateNetworkPolicy,
  'networking.k8s.io/v1/Ingress': validateIngress,
  'monitoring.coreos.com/v1/ServiceMonitor': validateServiceMonitor
}

/**
 * Schema validation plus kubeconform's `-strict`: the bundled validators accept unknown fields
 * (a misspelt `readinesProbe` would pass), so the document is wrapped in proxies that record which
 * fields the compiled schema looked at; any field it never read is not in the schema.
 */
function validateStrict (doc: Json): string[] {
  const validate = SCHEMAS[`${doc.apiVersion}/${doc.kind}`]
  if (validate === undefined) return [`no schema for ${doc.apiVersion} ${doc.kind}`]
  const read = new WeakMap<object, Set<PropertyKey>>()
  const proxies = new WeakMap<object, object>()
  const wrap = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null) return value
    let proxy = proxies.get(value)
    if (proxy === undefined) {
      const seen = new Set<PropertyKey>()
      read.set(value, seen)
      proxy = new Proxy(value, {
        get (target, key, receiver) {
          seen.add(key)
          return wrap(Reflect.get(target, key, receiver))
        }
      })
      proxies.set(value, proxy)
    }
    return proxy
  }
  const problems: string[] = []
  if (!validate(wrap(doc))) {
    const errors = (validate as unknown as { errors?: SchemaError[] }).errors ?? []
    problems.push(...errors.map((e) => `${e.instancePath || '/'}: ${e.keyword} ${JSON.stringify(e.params)}`))
    return problems
  }
  const visit = (value: unknown, path: string): void => {
    if (typeof value !== 'object' || value === null) return
    const seen = read.get(value)
    for (const [key, child] of Object.entries(value)) {
      if (!Array.isArray(value) && seen?.has(key) !== true) problems.push(`${path}/${key}: unknown field`)
      else visit(child, `${path}/${key}`)
    }
  }
  visit(doc, '')
  return problems
}

interface K8sDoc { file: string, doc: Json }
/** What each kustomization under deploy/k8s renders to (test/helpers/kustomize.ts), plus the example Secret in its namespace. */
const RENDERINGS = ['base', 'overlays/staging', 'overlays/production'] as const
type Rendering = typeof RENDERINGS[number]
const SECRET_EXAMPLE = join(K8S_DIR, 'secret.example.yaml')
function rendered (which: Rendering): K8sDoc[] {
  const docs = renderKustomization(join(K8S_DIR, which)).map((doc) => ({ file: `${which} → ${doc.kind as string}`, doc }))
  const namespace = docs.find((d) => d.doc.kind === 'Namespace')?.doc.metadata.name as string | undefined
  const secrets = loadYaml(SECRET_EXAMPLE).map((doc) => ({ file: 'secret.example.yaml', doc: namespace === undefined ? doc : { ...doc, metadata: { ...doc.metadata, namespace } } }))
  return [...docs, ...secrets]
}
function containerOf (deployment: Json | undefined): Json {
  return deployment?.spec.template.spec.containers[0] as Json
}
function portNumber (container: Json, port: string | number): number | undefined {
  return typeof port === 'number' ? port : (container.ports as Json[]).find((p) => p.name === port)?.containerPort as number | undefined
}
const matches = (selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean =>
  selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v)

t.test('the strict schema check refuses what it must', async (t) => {
  const good = { apiVersion: 'v1', kind: 'Service', metadata: { name: 's', labels: { a: 'b' } }, spec: { selector: { a: 'b' }, ports: [{ port: 80, targetPort: 'http' }] } }
  t.same(validateStrict(good), [], 'a valid Service (maps and int-or-string included)')
  t.same(validateStrict({ ...good, spec: { ...good.spec, portz: [] } }), ['/spec/portz: unknown field'], 'a misspelt field')
  t.match(validateStrict({ ...good, spec: { ports: [{ port: 'eighty' }] } }).join(), /\/spec\/ports\/0\/port: type/, 'a wrong type')
  t.same(validateStrict({ apiVersion: 'v9', kind: 'Thing' }), ['no schema for v9 Thing'], 'an unknown kind')
})

t.test('k8s base: kustomization lists every manifest of base/; the example Secret is in none', async (t) => {
  const [kustomization] = loadYaml(join(K8S_DIR, 'base', 'kustomization.yaml')) as [Json]
  const listed = (kustomization.resources as string[]).slice().sort()
  const manifests = walk(join(K8S_DIR, 'base')).map((f) => relative(join(K8S_DIR, 'base'), f)).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml').sort()
  t.same(listed, manifests, 'resources')
  t.equal(kustomization.namespace, undefined, 'the base sets no namespace: each overlay does')
  for (const which of RENDERINGS) t.notOk(rendered(which).some((d) => d.file !== 'secret.example.yaml' && d.doc.kind === 'Secret'), `${which}: applies no Secret (no placeholder token)`)
})

const OVERLAYS = {
  'overlays/staging': { namespace: 'petstore-staging', urlVariable: 'STAGING_BASE_URL' },
  'overlays/production': { namespace: 'petstore', urlVariable: 'PUBLIC_BASE_URL' }
} as const

t.test('k8s overlays: own namespace, public host from the environment\'s base URL, both servers documented, sizing', async (t) => {
  const sizes: Record<string, { min: number, cpu: string }> = {}
  for (const [which, expected] of Object.entries(OVERLAYS) as Array<[Rendering, typeof OVERLAYS[keyof typeof OVERLAYS]]>) {
    const docs = rendered(which)
    const find = (kind: string, name: string): Json | undefined => docs.find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc
    t.ok(find('Namespace', expected.namespace), `${which}: creates namespace ${expected.namespace}`)
    for (const { doc } of docs) {
      if (doc.kind !== 'Namespace') t.equal(doc.metadata.namespace, expected.namespace, `${which}: ${doc.kind} ${doc.metadata.name} is in ${expected.namespace}`)
    }
    const c = containerOf(find('Deployment', 'petstore-gateway'))
    const publicUrl = envValue(c, expected.urlVariable)
    t.ok(publicUrl !== undefined && /^https:\/\//.test(publicUrl), `${which}: ${expected.urlVariable} is an https URL (${publicUrl})`)
    for (const name of ['PUBLIC_BASE_URL', 'STAGING_BASE_URL']) t.ok(envValue(c, name), `${which}: ${name} set, so the OpenAPI document lists both servers`)
    const ingress = find('Ingress', 'petstore-gateway') as Json
    const host = new URL(publicUrl ?? 'http://invalid').hostname
    t.same((ingress.spec.rules as Json[]).map((r) => r.host), [host], `${which}: the Ingress serves ${host}`)
    t.same(ingress.spec.tls[0].hosts, [host], `${which}: with TLS for it`)
    const backend = ingress.spec.rules[0].http.paths[0].backend.service as Json
    const service = find('Service', backend.name) as Json
    t.ok(service && (service.spec.ports as Json[]).some((p) => p.name === backend.port.name), `${which}: the Ingress routes to the public Service's ${backend.port.name} port`)
    t.not(backend.name, 'petstore-gateway-admin', `${which}: never to the admin port`)
    const hpa = find('HorizontalPodAutoscaler', 'petstore-gateway') as Json
    sizes[which] = { min: hpa.spec.minReplicas as number, cpu: c.resources.requests.cpu as string }
    t.equal(find('Deployment', 'petstore-backend')?.spec.replicas, 1, `${which}: still one backend`)
  }
  t.ok((sizes['overlays/production']?.min ?? 0) > (sizes['overlays/staging']?.min ?? 0), 'production runs more gateways than staging')
  t.not(sizes['overlays/production']?.cpu, sizes['overlays/staging']?.cpu, 'and sizes them differently')
  const stagingConfig = rendered('overlays/staging').find((d) => d.doc.kind === 'ConfigMap')?.doc as Json
  const productionConfig = rendered('overlays/production').find((d) => d.doc.kind === 'ConfigMap')?.doc as Json
  t.not(stagingConfig.data['keys.yaml'], productionConfig.data['keys.yaml'], 'staging has keys of its own')
  t.equal(stagingConfig.data['plans.yaml'], productionConfig.data['plans.yaml'], 'and the plans production has')
})

t.test('the test renderer merges as kustomize does: maps deep, containers/env by name, other lists replaced', async (t) => {
  const base = { spec: { replicas: 2, containers: [{ name: 'a', image: 'x:1', env: [{ name: 'A', value: '1' }, { name: 'B', value: '2' }], args: ['p', 'q'] }] } }
  const merged = strategicMerge(base, { spec: { containers: [{ name: 'a', env: [{ name: 'B', value: '3' }, { name: 'C', value: '4' }], args: ['r'] }, { name: 'b', image: 'y:1' }] } })
  t.same(merged, { spec: { replicas: 2, containers: [{ name: 'a', image: 'x:1', env: [{ name: 'A', value: '1' }, { name: 'B', value: '3' }, { name: 'C', value: '4' }], args: ['r'] }, { name: 'b', image: 'y:1' }] } })
  t.same(strategicMerge({ a: 1, b: 2 }, { b: null }), { a: 1 }, 'null deletes')
  t.same(base.spec.containers[0]?.env.length, 2, 'the target is not changed')
})

/** The checks every rendering must pass: the base alone, and each overlay's output. */
function checkRendering (which: Rendering): void {
  const k8sDocs = rendered(which)
  const find = (kind: string, name: string): Json | undefined => k8sDocs.find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc

  t.test(`k8s ${which}: every manifest passes its Kubernetes / Prometheus Operator schema, unknown fields refused`, async (t) => {
    t.ok(k8sDocs.length >= 12, `${k8sDocs.length} documents`)
    for (const { file, doc } of k8sDocs) {
      t.same(validateStrict(doc), [], `${file}: ${doc.kind} ${doc.metadata?.name}`)
    }
  })

  t.test(`k8s ${which}: kinds the deployment needs`, async (t) => {
    const kinds = k8sDocs.map((d) => `${d.doc.kind}/${d.doc.metadata.name}`).sort()
    for (const expected of [
      'ConfigMap/petstore-gateway-config', 'Deployment/petstore-backend', 'Deployment/petstore-gateway',
      'HorizontalPodAutoscaler/petstore-gateway', 'NetworkPolicy/petstore-backend', 'NetworkPolicy/petstore-gateway',
      'PersistentVolumeClaim/petstore-backend-data', 'PodDisruptionBudget/petstore-gateway', 'Secret/petstore-gateway',
      'Service/petstore-backend', 'Service/petstore-gateway', 'Service/petstore-gateway-admin', 'ServiceMonitor/petstore-gateway',
      'Ingress/petstore-gateway'
    ]) t.ok(kinds.includes(expected), expected)
  })


  t.test(`k8s ${which}: every workload is hardened and sized`, async (t) => {
    const deployments = k8sDocs.filter((d) => d.doc.kind === 'Deployment').map((d) => d.doc)
    const images = new Set<string>()
    for (const d of deployments) {
      const name = d.metadata.name as string
      const pod = d.spec.template.spec as Json
      t.ok(matches(d.spec.selector.matchLabels, d.spec.template.metadata.labels), `${name}: selector matches its pods`)
      t.equal(pod.securityContext?.runAsNonRoot, true, `${name}: runAsNonRoot`)
      t.equal(pod.securityContext?.seccompProfile?.type, 'RuntimeDefault', `${name}: seccomp RuntimeDefault`)
      t.equal(pod.automountServiceAccountToken, false, `${name}: no service account token`)
      const user = /^(\d+)/.exec(parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')).stages.at(-1)?.instructions.filter((i) => i.keyword === 'USER').at(-1)?.args ?? '')?.[1]
      t.equal(String(pod.securityContext?.runAsUser), user, `${name}: runAsUser is the image's USER`)
      for (const c of pod.containers as Json[]) {
        images.add(c.image as string)
        t.notMatch(c.image, /:latest$|^[^:]+$/, `${name}/${c.name}: image has a pinned tag`)
        t.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${name}/${c.name}: cpu and memory requests`)
        t.ok(c.resources?.limits?.memory, `${name}/${c.name}: memory limit`)
        t.equal(c.securityContext?.allowPrivilegeEscalation, false, `${name}/${c.name}: no privilege escalation`)
        t.equal(c.securityContext?.readOnlyRootFilesystem, true, `${name}/${c.name}: read-only root filesystem`)
        t.same(c.securityContext?.capabilities?.drop, ['ALL'], `${name}/${c.name}: drops all capabilities`)
        t.notOk(c.command, `${name}/${c.name}: keeps the image ENTRYPOINT (tini)`)
        t.ok(c.readinessProbe && c.livenessProbe, `${name}/${c.name}: readiness and liveness probes`)
        t.equal(envValue(c, 'NODE_ENV'), 'production', `${name}/${c.name}: NODE_ENV=production`)
        for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe].filter(Boolean) as Json[]) {
          const port = probe.httpGet?.port ?? probe.tcpSocket?.port
          t.ok(portNumber(c, port), `${name}/${c.name}: probe port ${port} is a container port`)
        }
      }
    }
    t.equal(images.size, 1, 'one image for both roles')
  })

  t.test(`k8s ${which}: gateway deployment — ports from the env, probes on the admin port, drain budget, live config`, async (t) => {
    const deployment = find('Deployment', 'petstore-gateway') as Json
    const pod = deployment.spec.template.spec as Json
    const c = containerOf(deployment)
    t.same(c.args, ['node', 'dist/gateway/server.js'], 'gateway role')
    for (const name of envOf(c).keys()) t.ok(GATEWAY_ENV.has(name), `env ${name} is read by the gateway`)
    t.equal(portNumber(c, 'http'), Number(envValue(c, 'GATEWAY_PORT') ?? DEFAULT_GATEWAY_PORT), 'containerPort http = GATEWAY_PORT')
    t.equal(portNumber(c, 'admin'), Number(envValue(c, 'ADMIN_PORT') ?? DEFAULT_ADMIN_PORT), 'containerPort admin = ADMIN_PORT')
    t.equal(envValue(c, 'ADMIN_HOST'), '0.0.0.0', 'admin port reachable by the kubelet and Prometheus')
    t.equal(c.readinessProbe.httpGet?.path, '/readyz', 'readiness on /readyz')
    t.equal(c.livenessProbe.httpGet?.path, '/healthz', 'liveness on /healthz')
    for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
      t.equal(portNumber(c, probe.httpGet.port), portNumber(c, 'admin'), `${probe.httpGet.path} probed on the admin port`)
    }
    t.equal(deployment.spec.replicas, undefined, 'replicas left to the HorizontalPodAutoscaler')
    t.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0, 'rolling updates never drop below capacity')

    const adminToken = envOf(c).get('ADMIN_TOKEN')?.valueFrom?.secretKeyRef
    const secret = find('Secret', adminToken?.name) as Json
    t.ok(secret?.stringData?.[adminToken?.key] ?? secret?.data?.[adminToken?.key], 'ADMIN_TOKEN comes from the Secret')
    t.notOk(adminToken?.optional, 'and is required')
    for (const name of ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS', 'REDIS_SENTINEL_NAME']) {
      const ref = envOf(c).get(name)?.valueFrom?.secretKeyRef
      t.equal(ref?.name, adminToken?.name, `${name} from the same Secret (may hold a password)`)
    }

    // SIGTERM after preStop; the drain (SHUTDOWN_GRACE_MS) must finish before the kubelet's SIGKILL.
    const preStop = c.lifecycle?.preStop?.exec?.command as string[] | undefined
    t.equal(preStop?.[0], 'sleep', 'preStop waits for endpoints to stop routing here')
    const preStopMs = Number(preStop?.[1]) * 1000
    const drainMs = Number(envValue(c, 'SHUTDOWN_GRACE_MS') ?? DEFAULT_SHUTDOWN_GRACE_MS)
    t.ok(preStopMs > 0 && preStopMs + drainMs < pod.terminationGracePeriodSeconds * 1000,
      `preStop ${preStopMs} ms + drain ${drainMs} ms < terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} s`)
    t.ok(drainMs >= Number(envValue(c, 'UPSTREAM_TIMEOUT_MS') ?? 0), 'the drain lets the slowest allowed upstream call finish')

    const mount = (c.volumeMounts as Json[]).find((m) => m.mountPath === envValue(c, 'CONFIG_DIR'))
    t.ok(mount, 'CONFIG_DIR is a mounted volume')
    t.notOk(mount?.subPath, 'mounted as a directory (a subPath mount never sees ConfigMap updates)')
    const volume = (pod.volumes as Json[]).find((v) => v.name === mount?.name)
    const configMap = find('ConfigMap', volume?.configMap?.name) as Json
    t.ok(configMap, 'from the gateway ConfigMap')
    t.same(Object.keys(configMap.data).sort(), [...CONFIG_FILES].sort(), 'the ConfigMap holds exactly the config files')
    checkGatewayConfig(t, configMap.data as ConfigTexts, 'ConfigMap petstore-gateway-config')

    const backendUrl = new URL(envValue(c, 'BACKEND_URL') as string)
    const backendService = find('Service', backendUrl.hostname) as Json
    t.ok(backendService, `BACKEND_URL names the Service ${backendUrl.hostname}`)
    t.equal(backendService?.spec.ports[0].port, Number(backendUrl.port), 'on its port')
  })

  t.test(`k8s ${which}: backend — one replica, Recreate, SQLite on a PersistentVolumeClaim, ClusterIP only`, async (t) => {
    const deployment = find('Deployment', 'petstore-backend') as Json
    const c = containerOf(deployment)
    t.same(c.args, ['node', 'dist/backend/server.js'], 'backend role')
    for (const name of envOf(c).keys()) t.ok(BACKEND_ENV.has(name), `env ${name} is read by the backend`)
    t.equal(deployment.spec.replicas, 1, 'one replica (one SQLite writer)')
    t.equal(deployment.spec.strategy.type, 'Recreate', 'Recreate: the old pod is gone before the new one opens the file')
    t.equal(envValue(c, 'BACKEND_HOST'), '0.0.0.0', 'listens on the pod address')
    t.equal(portNumber(c, 'http'), Number(envValue(c, 'BACKEND_PORT')), 'containerPort = BACKEND_PORT')
    t.equal(Number(envValue(c, 'BACKEND_PORT')), BACKEND_PORT, 'the default backend port (docs/decisions.md §8)')
    const mount = (c.volumeMounts as Json[]).find((m) => m.mountPath === posix.dirname(envValue(c, 'PETS_DB') as string))
    const volume = (deployment.spec.template.spec.volumes as Json[]).find((v) => v.name === mount?.name)
    const pvc = find('PersistentVolumeClaim', volume?.persistentVolumeClaim?.claimName) as Json
    t.same(pvc?.spec.accessModes, ['ReadWriteOnce'], 'PETS_DB on a ReadWriteOnce claim')
    t.equal(deployment.spec.template.spec.securityContext.fsGroup, deployment.spec.template.spec.securityContext.runAsGroup, 'the volume is writable by the app user')
    const service = find('Service', 'petstore-backend') as Json
    t.equal(service.spec.type, 'ClusterIP', 'backend Service is ClusterIP')
    t.ok(matches(service.spec.selector, deployment.spec.template.metadata.labels), 'and selects the backend pods')
    t.equal(portNumber(c, service.spec.ports[0].targetPort), BACKEND_PORT, 'targetPort resolves to the backend port')
  })

  t.test(`k8s ${which}: services, autoscaler, disruption budget and ServiceMonitor target the gateway`, async (t) => {
    const deployment = find('Deployment', 'petstore-gateway') as Json
    const labels = deployment.spec.template.metadata.labels as Record<string, string>
    const c = containerOf(deployment)
    for (const name of ['petstore-gateway', 'petstore-gateway-admin']) {
      const service = find('Service', name) as Json
      t.equal(service.spec.type, 'ClusterIP', `${name}: ClusterIP`)
      t.ok(matches(service.spec.selector, labels), `${name}: selects the gateway pods`)
      for (const port of service.spec.ports as Json[]) t.ok(portNumber(c, port.targetPort), `${name}: targetPort ${port.targetPort} is a container port`)
    }
    t.equal(portNumber(c, find('Service', 'petstore-gateway')?.spec.ports[0].targetPort), portNumber(c, 'http'), 'public Service → public port')
    t.equal(portNumber(c, find('Service', 'petstore-gateway-admin')?.spec.ports[0].targetPort), portNumber(c, 'admin'), 'admin Service → admin port')

    const hpa = find('HorizontalPodAutoscaler', 'petstore-gateway') as Json
    t.same(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'petstore-gateway' }, 'HPA scales the gateway')
    t.ok(hpa.spec.minReplicas >= 2 && hpa.spec.maxReplicas > hpa.spec.minReplicas, 'at least two replicas, room to grow')
    t.ok(c.resources.requests.cpu, 'CPU utilisation target has a CPU request to divide by')
    const pdb = find('PodDisruptionBudget', 'petstore-gateway') as Json
    t.ok(matches(pdb.spec.selector.matchLabels, labels), 'PDB selects the gateway pods')
    t.ok(pdb.spec.maxUnavailable < hpa.spec.minReplicas || pdb.spec.minAvailable < hpa.spec.minReplicas, 'PDB leaves a gateway up at the minimum scale')

    const monitor = find('ServiceMonitor', 'petstore-gateway') as Json
    const admin = find('Service', 'petstore-gateway-admin') as Json
    t.ok(matches(monitor.spec.selector.matchLabels, admin.metadata.labels), 'ServiceMonitor selects the admin Service')
    t.notOk(matches(monitor.spec.selector.matchLabels, find('Service', 'petstore-gateway')?.metadata.labels), 'and not the public one')
    const endpoint = monitor.spec.endpoints[0] as Json
    t.ok((admin.spec.ports as Json[]).some((p) => p.name === endpoint.port), 'on the admin port')
    t.equal(endpoint.path, '/metrics', '/metrics')
    const tokenRef = envOf(c).get('ADMIN_TOKEN')?.valueFrom?.secretKeyRef
    t.same([endpoint.authorization?.credentials?.name, endpoint.authorization?.credentials?.key], [tokenRef?.name, tokenRef?.key], 'scrapes with the admin token')
  })

  t.test(`k8s ${which}: network policies — backend only from gateways, admin port only from monitoring`, async (t) => {
    const gatewayLabels = find('Deployment', 'petstore-gateway')?.spec.template.metadata.labels as Record<string, string>
    const backendLabels = find('Deployment', 'petstore-backend')?.spec.template.metadata.labels as Record<string, string>
    const c = containerOf(find('Deployment', 'petstore-gateway'))
    const adminPort = portNumber(c, 'admin')
    const publicPort = portNumber(c, 'http')

    const backend = find('NetworkPolicy', 'petstore-backend') as Json
    t.ok(matches(backend.spec.podSelector.matchLabels, backendLabels), 'applies to the backend pods')
    t.ok(backend.spec.policyTypes.includes('Ingress'), 'isolates their ingress')
    for (const rule of backend.spec.ingress as Json[]) {
      t.ok(rule.from?.length > 0 && (rule.from as Json[]).every((f) => matches(f.podSelector?.matchLabels, gatewayLabels) && f.namespaceSelector === undefined && f.ipBlock === undefined), 'every peer is a gateway pod')
      t.same((rule.ports as Json[]).map((p) => p.port), [BACKEND_PORT], 'on the backend port only')
    }

    const gateway = find('NetworkPolicy', 'petstore-gateway') as Json
    t.ok(matches(gateway.spec.podSelector.matchLabels, gatewayLabels), 'applies to the gateway pods')
    t.ok(gateway.spec.policyTypes.includes('Ingress'), 'isolates their ingress')
    const rules = gateway.spec.ingress as Json[]
    const opensTo = (port: number | undefined): Json[] => rules.filter((r) => r.ports === undefined || (r.ports as Json[]).some((p) => p.port === port || portNumber(c, p.port) === port))
    t.ok(opensTo(publicPort).length > 0, 'the public port is open')
    const adminRules = opensTo(adminPort)
    t.ok(adminRules.length > 0, 'the admin port has a rule')
    for (const rule of adminRules) {
      t.ok(rule.from?.length > 0, 'admin rule names its peers')
      for (const peer of rule.from as Json[] ?? []) {
        t.same(peer.namespaceSelector?.matchLabels, { 'kubernetes.io/metadata.name': 'monitoring' }, 'admin port only from the monitoring namespace')
      }
    }
  })

  // ---------------------------------------------------------------------------------------------
}

for (const which of RENDERINGS) checkRendering(which)

// The manifests probe /readyz on the admin port, and HTTP probes cannot carry a Secret: the admin
// app must answer the probe paths without ADMIN_TOKEN (and keep guarding everything else).

t.test('the admin app answers the Kubernetes probe paths without ADMIN_TOKEN', async (t) => {
  const find = (kind: string, name: string): Json | undefined => rendered('base').find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc
  const gateway = Fastify()
  const admin = await buildAdmin({ gateway, readiness: new ReadinessRegistry(), token: 'probe-test-token' })
  t.teardown(async () => { await admin.close(); await gateway.close() })
  const deployment = find('Deployment', 'petstore-gateway') as Json
  const c = containerOf(deployment)
  const paths = [c.startupProbe, c.readinessProbe, c.livenessProbe].map((p: Json) => p.httpGet.path as string)
  for (const path of new Set(paths)) {
    const res = await admin.inject({ method: 'GET', url: path })
    t.equal(res.statusCode, 200, `${path} without a token → 200`)
  }
  const guarded = await admin.inject({ method: 'GET', url: '/admin/bans' })
  t.equal(guarded.statusCode, 401, 'the admin API still needs the token')
})

// The admin app answers only Host names it knows (src/gateway/admin/request-guard.ts): whatever
// Prometheus scrapes by — the pod IP on Kubernetes, the service names in compose — must be one.

t.test('Prometheus\'s scrape targets are admin hosts: the pod IP on Kubernetes, the service names in compose', async (t) => {
  const deployment = rendered('base').find((d) => d.doc.kind === 'Deployment' && d.doc.metadata?.name === 'petstore-gateway')?.doc
  t.same(envOf(containerOf(deployment)).get('ADMIN_HOSTS')?.valueFrom, { fieldRef: { fieldPath: 'status.podIP' } }, 'Kubernetes: ADMIN_HOSTS is the pod IP')
  const services = composeFile(COMPOSE_VARIANTS.default!.vars).services as Record<string, Json>
  const targets = (parseAllDocuments(readFileSync(join(DEPLOY, 'prometheus', 'prometheus.yml'), 'utf8'))[0] as { toJS: () => Json }).toJS()
    .scrape_configs.flatMap((c: Json) => c.static_configs.flatMap((s: Json) => s.targets as string[]))
  for (const name of ['gateway-1', 'gateway-2']) {
    const hosts = settingsFromEnv(services[name]?.environment as Record<string, string>).adminHosts
    for (const target of targets) t.ok(hosts.includes(target.split(':')[0]), `compose ${name}: ADMIN_HOSTS has ${target}'s host`)
  }
  const gateway = Fastify()
  const admin = await buildAdmin({ gateway, readiness: new ReadinessRegistry(), hosts: ['10.42.0.7'] })
  t.teardown(async () => { await admin.close(); await gateway.close() })
  t.equal((await admin.inject({ method: 'GET', url: '/admin/none', headers: { host: '10.42.0.7:9091' } })).statusCode, 404, 'a request naming the pod IP is routed')
  t.equal((await admin.inject({ method: 'GET', url: '/admin/none', headers: { host: '10.42.0.8:9091' } })).statusCode, 403, 'one naming another pod\'s IP is refused')
})
