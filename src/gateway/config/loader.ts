// Pure config loading: the three YAML texts in → one validated, frozen snapshot, or a ConfigError
// whose problems each name the file, the path inside it and the reason. Reading the directory is
// the only I/O, kept in `loadConfigDir` so reload and `config check` share exactly this code.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { CORE_SCHEMA, load as parseYaml, YAMLException } from 'js-yaml'
import { parseCanonicalKeys } from './keys-fast-path.js'
import { DEFAULT_IPV6_PREFIX } from '../edge/client-address.js'
import { keysFileSchema, plansFileSchema, routesFileSchema } from './schema.js'
import { ALL_SCOPES, type BanPolicy, type ConfigSnapshot, type KeyRecord, type Limits, type RouteRule, type Scope } from './types.js'

export const CONFIG_FILES = ['plans.yaml', 'keys.yaml', 'routes.yaml'] as const
export type ConfigFileName = typeof CONFIG_FILES[number]
export type ConfigTexts = Record<ConfigFileName, string>

export const DEFAULT_BAN_POLICY: BanPolicy = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86_400 }

export class ConfigError extends Error {
  readonly problems: readonly string[]
  constructor (problems: string[]) {
    super(`invalid config: ${problems.join('; ')}`)
    this.name = 'ConfigError'
    this.problems = problems
  }
}

const ajv = new Ajv({ allErrors: true, strict: true })
const validators: Record<ConfigFileName, ValidateFunction> = {
  'plans.yaml': ajv.compile(plansFileSchema),
  'keys.yaml': ajv.compile(keysFileSchema),
  'routes.yaml': ajv.compile(routesFileSchema)
}

interface PlansFile {
  plans: Record<string, { perMinute?: number, perDay?: number, custom?: true }>
  anonymous: Limits & { ipv6Prefix?: number }
  ban?: Partial<BanPolicy>
}
interface KeyEntry {
  id: string
  sha256: string
  consumer?: string
  plan: string
  limits?: Limits
  disabled?: boolean
  expiresAt?: string
  scopes?: Scope[]
}
interface KeysFile { keys: KeyEntry[] }
interface RoutesFile {
  routes: Array<{ method: string, path: string, deprecated?: { since: string, sunset: string, successor?: string }, stability?: 'experimental' | 'beta' }>
}

/** `/keys/3/plan` → `keys[3].plan` */
function formatPath (pointer: string): string {
  if (pointer === '') return '(root)'
  return pointer.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, seg) => /^\d+$/.test(seg) ? `${acc}[${seg}]` : acc === '' ? seg : `${acc}.${seg}`, '')
}

function describe (file: string, e: ErrorObject): string {
  const at = formatPath(e.instancePath)
  const params = e.params as Record<string, unknown>
  switch (e.keyword) {
    case 'additionalProperties':
      return `${file}: ${at === '(root)' ? '' : `${at}: `}unknown field "${String(params.additionalProperty)}"`
    case 'required':
      return `${file}: ${at === '(root)' ? '' : `${at}: `}missing field "${String(params.missingProperty)}"`
    case 'enum':
      return `${file}: ${at}: must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`
    case 'propertyNames':
      return `${file}: ${at}: invalid name "${String(params.propertyName)}"`
    default:
      return `${file}: ${at}: ${e.message ?? 'is invalid'}`
  }
}

const MALFORMED = Symbol('malformed')

function readYaml (file: ConfigFileName, text: string, problems: string[]): unknown {
  const canonical = file === 'keys.yaml' ? parseCanonicalKeys(text) : undefined
  if (canonical !== undefined) return canonical
  try {
    // CORE_SCHEMA: dates stay strings (no YAML timestamps); duplicate keys are errors.
    return parseYaml(text, { schema: CORE_SCHEMA, filename: file })
  } catch (err) {
    if (!(err instanceof YAMLException)) throw err
    const where = err.mark === undefined ? '' : ` at line ${err.mark.line + 1}, column ${err.mark.column + 1}`
    problems.push(`${file}: malformed YAML${where}: ${err.reason}`)
    return MALFORMED
  }
}

function parseFile<T> (file: ConfigFileName, text: string, problems: string[]): T | undefined {
  const data = readYaml(file, text, problems)
  if (data === MALFORMED) return undefined
  const validate = validators[file]
  if (!validate(data)) {
    for (const e of validate.errors ?? []) {
      if (e.keyword === 'propertyNames' && e.propertyName === undefined) continue
      problems.push(describe(file, e))
    }
    return undefined
  }
  return data as T
}

function sameLimits (a: KeyRecord, b: KeyRecord): boolean {
  return a.plan === b.plan && a.limits.perMinute === b.limits.perMinute && a.limits.perDay === b.limits.perDay
}

function limitsText (limits: Limits): string {
  return `(${limits.perMinute}/min, ${limits.perDay}/day)`
}

/** Unix ms of an RFC 3339 timestamp or a date alone (00:00 UTC); NaN for a day the calendar lacks (Date.parse would roll 02-31 over). */
function toMillis (date: string): number {
  const [year = NaN, month = NaN, day = NaN] = date.slice(0, 10).split('-').map(Number)
  const calendar = new Date(Date.UTC(year, month - 1, day))
  if (calendar.getUTCMonth() !== month - 1 || calendar.getUTCDate() !== day) return NaN
  return Date.parse(date.length === 10 ? `${date}T00:00:00Z` : date)
}

/** Validates and freezes one config; throws ConfigError listing every problem found. */
export function parseConfig (texts: ConfigTexts, loadedAt: number = Date.now()): ConfigSnapshot {
  const problems: string[] = []
  const plansFile = parseFile<PlansFile>('plans.yaml', texts['plans.yaml'], problems)
  const keysFile = parseFile<KeysFile>('keys.yaml', texts['keys.yaml'], problems)
  const routesFile = parseFile<RoutesFile>('routes.yaml', texts['routes.yaml'], problems)

  const plans = new Map<string, Limits | undefined>()
  if (plansFile !== undefined) {
    for (const [name, plan] of Object.entries(plansFile.plans)) {
      if (plan.custom === true && plan.perMinute === undefined && plan.perDay === undefined) {
        plans.set(name, undefined)
      } else if (plan.custom === undefined && plan.perMinute !== undefined && plan.perDay !== undefined) {
        plans.set(name, { perMinute: plan.perMinute, perDay: plan.perDay })
      } else {
        problems.push(`plans.yaml: plans.${name}: needs perMinute and perDay, or custom: true (not both)`)
      }
    }
  }

  const keysByDigest = new Map<string, KeyRecord>()
  const keysById = new Map<string, KeyRecord>()
  /** consumer id → the first credential seen for it and that entry's index, to name both on a disagreement. */
  const consumers = new Map<string, { record: KeyRecord, index: number }>()
  if (keysFile !== undefined && plansFile !== undefined) {
    keysFile.keys.forEach((key, i) => {
      const at = `keys.yaml: keys[${i}]`
      if (!plans.has(key.plan)) {
        problems.push(`${at}.plan: unknown plan "${key.plan}"`)
        return
      }
      const planLimits = plans.get(key.plan)
      const limits = key.limits ?? planLimits
      if (limits === undefined) {
        problems.push(`${at}: plan "${key.plan}" is custom, so the key needs limits: { perMinute, perDay }`)
        return
      }
      if (keysById.has(key.id)) {
        problems.push(`${at}.id: duplicate id "${key.id}"`)
        return
      }
      const sameDigest = keysByDigest.get(key.sha256)
      if (sameDigest !== undefined) {
        problems.push(`${at}.sha256: same digest as key "${sameDigest.id}"`)
        return
      }
      let expiresAt: number | undefined
      if (key.expiresAt !== undefined) {
        expiresAt = toMillis(key.expiresAt)
        if (Number.isNaN(expiresAt)) {
          problems.push(`${at}.expiresAt: "${key.expiresAt}" is not a real date`)
          return
        }
      }
      const consumerId = key.consumer ?? key.id
      const record: KeyRecord = Object.freeze({
        id: key.id,
        consumerId,
        plan: key.plan,
        limits: Object.freeze({ ...limits }),
        disabled: key.disabled === true,
        expiresAt,
        scopes: key.scopes === undefined ? ALL_SCOPES : Object.freeze(ALL_SCOPES.filter((s) => key.scopes?.includes(s)))
      })
      const first = consumers.get(consumerId)
      if (first !== undefined && !sameLimits(first.record, record)) {
        problems.push(`${at}: consumer "${consumerId}" has plan "${record.plan}" ${limitsText(record.limits)} here but ` +
          `plan "${first.record.plan}" ${limitsText(first.record.limits)} in keys[${first.index}] ("${first.record.id}"): ` +
          'credentials of one consumer must agree on plan and limits')
        return
      }
      if (first === undefined) consumers.set(consumerId, { record, index: i })
      keysByDigest.set(key.sha256, record)
      keysById.set(key.id, record)
    })
  }

  const routes: RouteRule[] = []
  if (routesFile !== undefined) {
    const seen = new Set<string>()
    routesFile.routes.forEach((r, i) => {
      const at = `routes.yaml: routes[${i}]`
      const id = `${r.method} ${r.path}`
      if (seen.has(id)) {
        problems.push(`${at}: duplicate route ${id}`)
        return
      }
      seen.add(id)
      let deprecated: RouteRule['deprecated']
      if (r.deprecated !== undefined) {
        const since = toMillis(r.deprecated.since)
        const sunset = toMillis(r.deprecated.sunset)
        if (Number.isNaN(since) || Number.isNaN(sunset)) {
          problems.push(`${at}.deprecated: since and sunset must be real dates`)
          return
        }
        if (sunset < since) {
          problems.push(`${at}.deprecated.sunset: must not be before since`)
          return
        }
        deprecated = Object.freeze({ since, sunset, successor: r.deprecated.successor })
      }
      routes.push(Object.freeze({ method: r.method, path: r.path, deprecated, stability: r.stability }))
    })
  }

  if (problems.length > 0 || plansFile === undefined) throw new ConfigError(problems)

  const version = createHash('sha256')
    .update(texts['plans.yaml']).update('\0').update(texts['keys.yaml']).update('\0').update(texts['routes.yaml'])
    .digest('hex').slice(0, 12)
  return Object.freeze({
    version,
    loadedAt,
    plans,
    anonymous: Object.freeze({ ipv6Prefix: DEFAULT_IPV6_PREFIX, ...plansFile.anonymous }),
    ban: Object.freeze({ ...DEFAULT_BAN_POLICY, ...plansFile.ban }),
    keysByDigest,
    keysById,
    routes: Object.freeze(routes)
  })
}

export function readConfigTexts (dir: string): ConfigTexts {
  const texts = {} as ConfigTexts
  const problems: string[] = []
  for (const file of CONFIG_FILES) {
    try {
      texts[file] = readFileSync(join(dir, file), 'utf8')
    } catch (err) {
      problems.push(`${file}: cannot read ${join(dir, file)}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`)
    }
  }
  if (problems.length > 0) throw new ConfigError(problems)
  return texts
}

export function loadConfigDir (dir: string, loadedAt?: number): ConfigSnapshot {
  return parseConfig(readConfigTexts(dir), loadedAt)
}
