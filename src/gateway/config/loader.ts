// Pure config loading: the three YAML texts in → one validated config, or a ConfigError whose
// problems each name the file, the path inside it and the reason. Every problem is reported in one
// go: the shape of all three files first, then every check across entries and files that can still
// run (a broken plans.yaml does not hide a duplicate id in keys.yaml). Reading the directory is the
// only I/O, kept in `readConfigTexts` (with the size cap) so start-up, reload (in a worker thread,
// see worker-loader.ts) and `config check` share exactly this code.
import { createHash } from 'node:crypto'
import { closeSync, fstatSync, openSync, readSync } from 'node:fs'
import { join } from 'node:path'
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { LineCounter, parseDocument } from 'yaml'
import { DEFAULT_CONFIG_MAX_BYTES } from '../runtime/settings.js'
import { parseCanonicalKeys } from './keys-fast-path.js'
import { DEFAULT_IPV6_PREFIX } from '../edge/client-address.js'
import { keysFileSchema, plansFileSchema, routesFileSchema } from './schema.js'
import { ALL_SCOPES, type AnonymousPolicy, type BanPolicy, type ConfigSnapshot, type KeyRecord, type Limits, type RouteRule, type Scope } from './types.js'

export const CONFIG_FILES = ['plans.yaml', 'keys.yaml', 'routes.yaml'] as const
export type ConfigFileName = typeof CONFIG_FILES[number]
export type ConfigTexts = Record<ConfigFileName, string>

export const DEFAULT_BAN_POLICY: BanPolicy = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86_400 }
/** Problems named one by one in a report (log line, 422 body, CLI); the rest are counted. */
export const DEFAULT_MAX_REPORTED_PROBLEMS = 50

export class ConfigError extends Error {
  /** At most DEFAULT_MAX_REPORTED_PROBLEMS problems, then one "… and N more problems" line. */
  readonly problems: readonly string[]
  constructor (problems: string[]) {
    super(`invalid config: ${problems.join('; ')}`)
    this.name = 'ConfigError'
    this.problems = problems
  }
}

/**
 * Collects problems, keeping the first `max` and counting the rest: a 50 MB file of bad entries
 * must not become a 25 MB log line or a 50 MB response body.
 */
export class ProblemList {
  private readonly shown: string[] = []
  private more = 0
  constructor (private readonly max = DEFAULT_MAX_REPORTED_PROBLEMS) {}
  add (problem: string): void {
    if (this.shown.length < this.max) this.shown.push(problem)
    else this.more++
  }

  get count (): number { return this.shown.length + this.more }
  report (): string[] {
    return this.more === 0 ? [...this.shown] : [...this.shown, `… and ${this.more.toLocaleString('en-US')} more problems`]
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

/** A config that passed every check, as plain data: what a worker thread sends back (see buildSnapshot). */
export interface ValidatedConfig {
  version: string
  plans: Array<[string, Limits | undefined]>
  anonymous: AnonymousPolicy
  ban: BanPolicy
  /** [sha256 digest, record] in file order. */
  keys: Array<[string, KeyRecord]>
  routes: RouteRule[]
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

function readYaml (file: ConfigFileName, text: string, problems: ProblemList): unknown {
  const canonical = file === 'keys.yaml' ? parseCanonicalKeys(text) : undefined
  if (canonical !== undefined) return canonical
  const lineCounter = new LineCounter()
  // YAML 1.2 core schema: dates stay strings (no timestamps); duplicate keys are errors.
  const doc = parseDocument(text, { schema: 'core', uniqueKeys: true, prettyErrors: false, lineCounter })
  const err = doc.errors[0]
  if (err !== undefined) {
    const { line, col } = lineCounter.linePos(err.pos[0])
    problems.add(`${file}: malformed YAML at line ${line}, column ${col}: ${err.message}`)
    return MALFORMED
  }
  return doc.toJS()
}

function parseFile<T> (file: ConfigFileName, text: string, problems: ProblemList): T | undefined {
  const data = readYaml(file, text, problems)
  if (data === MALFORMED) return undefined
  const validate = validators[file]
  if (!validate(data)) {
    for (const e of validate.errors ?? []) {
      if (e.keyword === 'propertyNames' && e.propertyName === undefined) continue
      problems.add(describe(file, e))
    }
    return undefined
  }
  return data as T
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

/** plans.yaml entries → limits (undefined: custom); `null` marks a plan that exists but is itself invalid. */
function checkPlans (plansFile: PlansFile, problems: ProblemList): Map<string, Limits | undefined | null> {
  const plans = new Map<string, Limits | undefined | null>()
  for (const [name, plan] of Object.entries(plansFile.plans)) {
    if (plan.custom === true && plan.perMinute === undefined && plan.perDay === undefined) {
      plans.set(name, undefined)
    } else if (plan.custom === undefined && plan.perMinute !== undefined && plan.perDay !== undefined) {
      plans.set(name, { perMinute: plan.perMinute, perDay: plan.perDay })
    } else {
      plans.set(name, null)
      problems.add(`plans.yaml: plans.${name}: needs perMinute and perDay, or custom: true (not both)`)
    }
  }
  return plans
}

/**
 * Every check of keys.yaml's entries. Duplicates, dates and consumers are checked whatever state
 * plans.yaml is in; what needs the plans (unknown plan, custom plan without limits, the limits one
 * consumer's credentials must share) only when plans.yaml could be read (`plans` defined).
 */
function checkKeys (keysFile: KeysFile, plans: Map<string, Limits | undefined | null> | undefined, problems: ProblemList): Array<[string, KeyRecord]> {
  const keys: Array<[string, KeyRecord]> = []
  const idAt = new Map<string, number>()
  const digestOwner = new Map<string, string>()
  /** consumer id → its first credential: index, id, plan and limits (resolved, or as written when plans.yaml is broken). */
  const consumers = new Map<string, { index: number, id: string, plan: string, limits: Limits | undefined }>()
  keysFile.keys.forEach((key, i) => {
    const at = `keys.yaml: keys[${i}]`
    let ok = true
    if (idAt.has(key.id)) {
      problems.add(`${at}.id: duplicate id "${key.id}"`)
      ok = false
    } else {
      idAt.set(key.id, i)
    }
    const sameDigest = digestOwner.get(key.sha256)
    if (sameDigest !== undefined) {
      problems.add(`${at}.sha256: same digest as key "${sameDigest}"`)
      ok = false
    } else {
      digestOwner.set(key.sha256, key.id)
    }
    let limits = key.limits
    if (plans !== undefined) {
      const planLimits = plans.get(key.plan)
      if (!plans.has(key.plan)) {
        problems.add(`${at}.plan: unknown plan "${key.plan}"`)
        ok = false
      } else if (planLimits === null) {
        ok = false // the plan's own problem is reported already
      } else {
        limits ??= planLimits
        if (limits === undefined) {
          problems.add(`${at}: plan "${key.plan}" is custom, so the key needs limits: { perMinute, perDay }`)
          ok = false
        }
      }
    }
    let expiresAt: number | undefined
    if (key.expiresAt !== undefined) {
      expiresAt = toMillis(key.expiresAt)
      if (Number.isNaN(expiresAt)) {
        problems.add(`${at}.expiresAt: "${key.expiresAt}" is not a real date`)
        ok = false
      }
    }
    const consumerId = key.consumer ?? key.id
    const first = consumers.get(consumerId)
    if (idAt.get(key.id) !== i) {
      // a repeated id is reported above; comparing it as its own consumer would only repeat that
    } else if (first === undefined) {
      consumers.set(consumerId, { index: i, id: key.id, plan: key.plan, limits })
    } else if (first.plan !== key.plan || first.limits?.perMinute !== limits?.perMinute || first.limits?.perDay !== limits?.perDay) {
      const mine = limits === undefined ? '' : ` ${limitsText(limits)}`
      const theirs = first.limits === undefined ? '' : ` ${limitsText(first.limits)}`
      problems.add(`${at}: consumer "${consumerId}" has plan "${key.plan}"${mine} here but ` +
        `plan "${first.plan}"${theirs} in keys[${first.index}] ("${first.id}"): ` +
        'credentials of one consumer must agree on plan and limits')
      ok = false
    }
    if (!ok || limits === undefined) return
    keys.push([key.sha256, {
      id: key.id,
      consumerId,
      plan: key.plan,
      limits: { ...limits },
      disabled: key.disabled === true,
      expiresAt,
      expiresHeader: expiresAt === undefined ? undefined : new Date(expiresAt).toUTCString(),
      scopes: key.scopes === undefined ? ALL_SCOPES : ALL_SCOPES.filter((s) => key.scopes?.includes(s))
    }])
  })
  return keys
}

function checkRoutes (routesFile: RoutesFile, problems: ProblemList): RouteRule[] {
  const routes: RouteRule[] = []
  const seen = new Set<string>()
  routesFile.routes.forEach((r, i) => {
    const at = `routes.yaml: routes[${i}]`
    const id = `${r.method} ${r.path}`
    if (seen.has(id)) {
      problems.add(`${at}: duplicate route ${id}`)
      return
    }
    seen.add(id)
    let deprecated: RouteRule['deprecated']
    if (r.deprecated !== undefined) {
      const since = toMillis(r.deprecated.since)
      const sunset = toMillis(r.deprecated.sunset)
      if (Number.isNaN(since) || Number.isNaN(sunset)) {
        problems.add(`${at}.deprecated: since and sunset must be real dates`)
        return
      }
      if (sunset < since) {
        problems.add(`${at}.deprecated.sunset: must not be before since`)
        return
      }
      deprecated = { since, sunset, successor: r.deprecated.successor }
    }
    routes.push({ method: r.method, path: r.path, deprecated, stability: r.stability })
  })
  return routes
}

/** Checks one config; throws ConfigError listing every problem found (capped at `maxProblems`). */
export function validateConfig (texts: ConfigTexts, maxProblems = DEFAULT_MAX_REPORTED_PROBLEMS): ValidatedConfig {
  const problems = new ProblemList(maxProblems)
  const plansFile = parseFile<PlansFile>('plans.yaml', texts['plans.yaml'], problems)
  const keysFile = parseFile<KeysFile>('keys.yaml', texts['keys.yaml'], problems)
  const routesFile = parseFile<RoutesFile>('routes.yaml', texts['routes.yaml'], problems)

  const plans = plansFile === undefined ? undefined : checkPlans(plansFile, problems)
  const keys = keysFile === undefined ? [] : checkKeys(keysFile, plans, problems)
  const routes = routesFile === undefined ? [] : checkRoutes(routesFile, problems)

  if (problems.count > 0 || plansFile === undefined || plans === undefined) throw new ConfigError(problems.report())
  const version = createHash('sha256')
    .update(texts['plans.yaml']).update('\0').update(texts['keys.yaml']).update('\0').update(texts['routes.yaml'])
    .digest('hex').slice(0, 12)
  return {
    version,
    plans: [...plans].map(([name, limits]) => [name, limits ?? undefined]),
    anonymous: { ipv6Prefix: DEFAULT_IPV6_PREFIX, ...plansFile.anonymous },
    ban: { ...DEFAULT_BAN_POLICY, ...plansFile.ban },
    keys,
    routes
  }
}

/** Freezes one key record (a worker's record arrives as a plain structured-clone copy). */
export function freezeKey (record: KeyRecord): KeyRecord {
  Object.freeze(record.limits)
  Object.freeze(record.scopes)
  return Object.freeze(record)
}

/** The snapshot of a validated config, everything frozen, keys indexed by digest and by id. */
export function buildSnapshot (config: ValidatedConfig, loadedAt: number = Date.now(),
  keysByDigest = new Map<string, KeyRecord>(), keysById = new Map<string, KeyRecord>()): ConfigSnapshot {
  for (const [digest, record] of config.keys) {
    const frozen = freezeKey(record)
    keysByDigest.set(digest, frozen)
    keysById.set(frozen.id, frozen)
  }
  return Object.freeze({
    version: config.version,
    loadedAt,
    plans: new Map(config.plans.map(([name, limits]) => [name, limits === undefined ? undefined : Object.freeze(limits)])),
    anonymous: Object.freeze(config.anonymous),
    ban: Object.freeze(config.ban),
    keysByDigest,
    keysById,
    routes: Object.freeze(config.routes.map((r) => Object.freeze({ ...r, deprecated: r.deprecated === undefined ? undefined : Object.freeze(r.deprecated) })))
  })
}

/** Validates and freezes one config; throws ConfigError listing every problem found. */
export function parseConfig (texts: ConfigTexts, loadedAt: number = Date.now()): ConfigSnapshot {
  return buildSnapshot(validateConfig(texts), loadedAt)
}

function formatBytes (n: number): string {
  return `${n.toLocaleString('en-US')} bytes`
}

/**
 * Reads one file, refusing it by its size before reading it (fstat on the open descriptor), and
 * reading at most `maxBytes` + 1 bytes, so a file that grows meanwhile is refused as well.
 */
function readCapped (path: string, file: ConfigFileName, maxBytes: number): string {
  const fd = openSync(path, 'r')
  try {
    const size = fstatSync(fd).size
    const limit = `the limit of ${formatBytes(maxBytes)} (CONFIG_MAX_BYTES)`
    if (size > maxBytes) throw new ConfigError([`${file}: ${path} is ${formatBytes(size)}, over ${limit}`])
    const chunks: Buffer[] = []
    let length = 0
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(Math.max(size - length, 0), maxBytes - length) + 1)
      const n = readSync(fd, chunk, 0, chunk.length, null)
      if (n === 0) break
      chunks.push(chunk.subarray(0, n))
      length += n
      if (length > maxBytes) throw new ConfigError([`${file}: ${path} grew over ${limit} while being read`])
    }
    return Buffer.concat(chunks, length).toString('utf8')
  } finally {
    closeSync(fd)
  }
}

export function readConfigTexts (dir: string, maxBytes = DEFAULT_CONFIG_MAX_BYTES): ConfigTexts {
  const texts = {} as ConfigTexts
  const problems: string[] = []
  for (const file of CONFIG_FILES) {
    try {
      texts[file] = readCapped(join(dir, file), file, maxBytes)
    } catch (err) {
      if (err instanceof ConfigError) problems.push(...err.problems)
      else problems.push(`${file}: cannot read ${join(dir, file)}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`)
    }
  }
  if (problems.length > 0) throw new ConfigError(problems)
  return texts
}

export interface LoadOptions {
  loadedAt?: number
  /** CONFIG_MAX_BYTES: per file. */
  maxBytes?: number
}

export function loadConfigDir (dir: string, opts: LoadOptions = {}): ConfigSnapshot {
  return parseConfig(readConfigTexts(dir, opts.maxBytes), opts.loadedAt)
}
