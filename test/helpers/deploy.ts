// What the deployment tests share: where deploy/ is, the environment names the gateway and the
// backend read (from their own sources), YAML loading that refuses duplicate keys, the gateway's own
// config loader run as production would, and each kustomization rendered by the real `kubectl
// kustomize` (test/helpers/prerequisites.ts installs kubectl where it is missing).
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { parseAllDocuments } from 'yaml'
import { assertNoDemoKeys } from '../../src/gateway/config/demo-keys.js'
import { parseConfig, type ConfigTexts } from '../../src/gateway/config/loader.js'

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const DEPLOY = join(ROOT, 'deploy')
export const COMPOSE_DIR = join(DEPLOY, 'compose')
export const K8S_DIR = join(DEPLOY, 'k8s')
/** Backend defaults (docs/decisions.md, Configuration); src/backend/server.ts keeps them private because importing it starts a server. */
export const BACKEND_PORT = 3001

export type Json = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

/** Environment names the gateway reads (settings.ts) and the backend reads (backend/server.ts); both read the tracing ones. */
const TRACING_ENV = [...readFileSync(join(ROOT, 'src/shared/tracing/settings.ts'), 'utf8').matchAll(/\(env, '([A-Z_]+)'/g)].map((m) => m[1] as string)
export const GATEWAY_ENV = new Set([
  ...[...readFileSync(join(ROOT, 'src/gateway/runtime/settings.ts'), 'utf8').matchAll(/\(env, '([A-Z_]+)'/g)].map((m) => m[1] as string),
  ...TRACING_ENV,
  'NODE_ENV'
])
export const BACKEND_ENV = new Set([
  ...[...readFileSync(join(ROOT, 'src/backend/server.ts'), 'utf8').matchAll(/process\.env\.([A-Z_]+)/g)].map((m) => m[1] as string),
  ...TRACING_ENV,
  'NODE_ENV'
])
/** Read by the image's HEALTHCHECK, not by the app. */
export const IMAGE_ENV = new Set(['HEALTHCHECK_URL'])

export function walk (dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })
}

export function loadYaml (path: string): Json[] {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'), { merge: true })
  if (!Array.isArray(docs)) return [] // an empty file
  for (const doc of docs) {
    const problems = [...doc.errors, ...doc.warnings].map((e) => e.message)
    if (problems.length > 0) throw new Error(`${relative(ROOT, path)}: ${problems.join('; ')}`)
  }
  return docs.map((doc) => doc.toJS() as Json).filter((value) => value !== null && value !== undefined)
}

/** The gateway's own loader on a config directory's texts, as a production process would run it. */
export function checkGatewayConfig (t: Test, texts: ConfigTexts, where: string): void {
  let problems: readonly string[] = []
  try {
    assertNoDemoKeys(parseConfig(texts))
  } catch (err) {
    problems = (err as { problems?: readonly string[] }).problems ?? [String(err)]
  }
  t.same(problems, [], `${where}: loads with NODE_ENV=production`)
}

export function envOf (container: Json): Map<string, Json> {
  return new Map((container.env as Json[] | undefined ?? []).map((e) => [e.name as string, e]))
}

export function envValue (container: Json, name: string): string | undefined {
  return envOf(container).get(name)?.value as string | undefined
}

export interface Instruction { keyword: string, args: string, line: number }
export interface Stage { image: string, name: string | undefined, instructions: Instruction[] }

export function parseDockerfile (text: string): { globalArgs: Map<string, string>, stages: Stage[] } {
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

const rendered = new Map<string, Json[]>()

/** The objects `kubectl kustomize dir` prints (rendered once per directory; each caller gets its own copy). */
export function kustomize (dir: string): Json[] {
  let docs = rendered.get(dir)
  if (docs === undefined) {
    const text = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    docs = parseAllDocuments(text).map((doc) => {
      if (doc.errors.length > 0) throw new Error(`kubectl kustomize ${dir}: ${doc.errors.map((e) => e.message).join('; ')}`)
      return doc.toJS() as Json
    }).filter((doc) => doc !== null && doc !== undefined)
    rendered.set(dir, docs)
  }
  return structuredClone(docs)
}

/** `${VAR}` and `${VAR:-default}` as docker compose interpolates them. */
export function interpolate (text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{([A-Z0-9_]+)(?::-([^}]*))?\}/g, (_all, name: string, fallback: string | undefined) => vars[name] ?? fallback ?? '')
}

/** KEY=value lines of a compose --env-file. */
export function envFile (path: string): Record<string, string> {
  return Object.fromEntries(readFileSync(path, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]))
}

export const COMPOSE_VARIANTS = {
  default: { vars: {} as Record<string, string>, configDir: join(COMPOSE_DIR, 'config') },
  staging: { vars: envFile(join(COMPOSE_DIR, 'staging.env')), configDir: join(COMPOSE_DIR, 'config-staging') }
}

export function composeFile (vars: Record<string, string>): Json {
  const file = join(COMPOSE_DIR, 'docker-compose.yml')
  const docs = parseAllDocuments(interpolate(readFileSync(file, 'utf8'), vars), { merge: true })
  if (!Array.isArray(docs) || docs.length !== 1) throw new Error('docker-compose.yml: one document expected')
  return (docs[0] as { toJS: () => Json }).toJS()
}

/** The first container of a Deployment's pods. */
export function containerOf (deployment: Json | undefined): Json {
  return deployment?.spec.template.spec.containers[0] as Json
}

/** The `--name value` options of a redis-server command line (compose `command`, k8s `args`), name → value. */
export function redisServerOptions (command: readonly string[]): Map<string, string> {
  const options = new Map<string, string>()
  const args = command[0] === 'redis-server' ? command.slice(1) : command
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string
    if (!arg.startsWith('--')) throw new Error(`redis-server option expected, got "${arg}"`)
    options.set(arg.slice(2), args[i + 1] ?? '')
    i++
  }
  return options
}

/** What a Redis for the gateway must run with (docs/deployment.md#what-redis-must-keep): AOF, fsync once a second, no eviction. */
export const REDIS_PERSISTENCE = { appendonly: 'yes', appendfsync: 'everysec', 'maxmemory-policy': 'noeviction' } as const
