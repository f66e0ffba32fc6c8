// Pure config loading: the three YAML texts in → one validated config, or a ConfigError whose
// problems each name the file, the path inside it and the reason. No I/O and no clock: reading the
// files is read-files.ts's job, and the caller stamps the snapshot with its own clock. Every problem
// is reported in one go: the shape of all three files first, then every check across fields,
// entries and files that can still run (a broken plans.yaml does not hide a duplicate id in
// keys.yaml, and a plan whose values are bad is still a plan a key may name). Start-up, reload (in a
// worker thread, see worker-loader.ts) and `config check` all run exactly this code.
import { createHash } from 'node:crypto'
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { LineCounter, parseDocument } from 'yaml'
import { DEFAULT_IPV6_PREFIX } from '../edge/client-address.js'
import { checkKeys, toMillis, type KeyEntry, type PlanState } from './check-keys.js'
import { parseCanonicalKeys } from './keys-fast-path.js'
import { checkShadow, monthCoversDay, type ShadowEntry } from './limits.js'
import { keysFileSchema, planEntrySchema, plansFileSchema, routesFileSchema } from './schema.js'
import { onFirstUse } from '../../shared/on-first-use.js'
import type { AnonymousPolicy, BanPolicy, ConfigSnapshot, KeyRecord, Limits, RouteRule } from './types.js'
import { checkWebhooks, PROCESS_SECRETS, WEBHOOKS_FILE, webhooksFileValidator, type SecretReader, type WebhooksConfig, type WebhooksFile } from '../webhooks/config.js'

export const CONFIG_FILES = ['plans.yaml', 'keys.yaml', 'routes.yaml'] as const
export type ConfigFileName = typeof CONFIG_FILES[number]
/** Files of the config directory that may be absent: without webhooks.yaml there are no webhooks. */
export const OPTIONAL_CONFIG_FILES = [WEBHOOKS_FILE] as const
export type OptionalConfigFileName = typeof OPTIONAL_CONFIG_FILES[number]
export type ConfigTexts = Record<ConfigFileName, string> & Partial<Record<OptionalConfigFileName, string>>

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
 * Collects problems, keeping the first `max` and counting the rest: a huge file of bad entries must
 * not become a log line or a response body of the same size.
 */
export class ProblemList {
  private readonly shown: string[] = []
  private more = 0
  private readonly max: number
  constructor (max = DEFAULT_MAX_REPORTED_PROBLEMS) {
    this.max = max
  }
  add (problem: string): void {
    if (this.shown.length < this.max) this.shown.push(problem)
    else this.more++
  }

  get count (): number { return this.shown.length + this.more }
  report (): string[] {
    return this.more === 0 ? [...this.shown] : [...this.shown, `… and ${this.more.toLocaleString('en-US')} more problems`]
  }
}

/** The schemas' validators, compiled at the first parse: the gateway's main thread imports this module but parses in its worker. */
const validators = onFirstUse(() => {
  const ajv = new Ajv({ allErrors: true, strict: true })
  const files: Record<ConfigFileName, ValidateFunction> = {
    'plans.yaml': ajv.compile(plansFileSchema),
    'keys.yaml': ajv.compile(keysFileSchema),
    'routes.yaml': ajv.compile(routesFileSchema)
  }
  return { files, planEntry: ajv.compile(planEntrySchema) }
})

interface PlanEntry { perMinute?: number, perDay?: number, perMonth?: number, overage?: 'allow' | 'block', custom?: true, shadow?: ShadowEntry }
interface PlansFile {
  plans: Record<string, PlanEntry>
  anonymous: Limits & { ipv6Prefix?: number }
  ban?: Partial<BanPolicy>
}
interface KeysFile { keys: KeyEntry[] }
interface RoutesFile {
  routes: Array<{ method: string, path: string, deprecated?: { since: string, sunset: string, successor?: string }, stability?: 'experimental' | 'beta', cost?: number }>
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
  /** webhooks.yaml, secrets read; undefined without the file. */
  webhooks?: WebhooksConfig | undefined
}
/** A validated config without its keys: they travel apart (in slices, from a worker) into a KeyIndex. */
export type ConfigWithoutKeys = Omit<ValidatedConfig, 'keys'>

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

/** The file's data, or MALFORMED after reporting why it is not YAML this loader reads (syntax, or aliases that expand too far). */
function readYaml (file: ConfigFileName | OptionalConfigFileName, text: string, problems: ProblemList): unknown {
  const canonical = file === 'keys.yaml' ? parseCanonicalKeys(text) : undefined
  if (canonical !== undefined) return canonical
  const lineCounter = new LineCounter()
  try {
    // YAML 1.2 core schema: dates stay strings (no timestamps); duplicate keys are errors.
    const doc = parseDocument(text, { schema: 'core', uniqueKeys: true, prettyErrors: false, lineCounter })
    const err = doc.errors[0]
    if (err !== undefined) {
      const { line, col } = lineCounter.linePos(err.pos[0])
      problems.add(`${file}: malformed YAML at line ${line}, column ${col}: ${err.message}`)
      return MALFORMED
    }
    return doc.toJS()
  } catch (err) {
    // The parser throws (rather than reports) on aliases that would expand without bound.
    problems.add(`${file}: YAML that cannot be read: ${err instanceof Error ? err.message : String(err)}`)
    return MALFORMED
  }
}

/** The file's data (MALFORMED if it is not YAML) and whether it has the schema's shape; shape problems are reported. */
function readFile (file: ConfigFileName, text: string, problems: ProblemList): { data: unknown, valid: boolean } {
  const data = readYaml(file, text, problems)
  if (data === MALFORMED) return { data, valid: false }
  const validate = validators().files[file]
  if (validate(data)) return { data, valid: true }
  for (const e of validate.errors ?? []) {
    if (e.keyword === 'propertyNames' && e.propertyName === undefined) continue
    problems.add(describe(file, e))
  }
  return { data, valid: false }
}

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** `where`: perDay (…) must be at least perMinute (…), when it is not. */
function checkDayCoversMinute (where: string, limits: Limits, problems: ProblemList): boolean {
  if (limits.perDay >= limits.perMinute) return true
  problems.add(`${where}: perDay (${limits.perDay}) must be at least perMinute (${limits.perMinute}): a day holds every minute's requests`)
  return false
}

/**
 * Every plan plans.yaml names, with its state. A plan whose entry is malformed (wrong shape, out of
 * bounds: reported by the schema) is still known by its name, as `invalid`, so that a key naming a
 * plan that does not exist is reported beside it. Undefined when plans.yaml has no `plans` map to read.
 */
function checkPlans (data: unknown, problems: ProblemList): Map<string, PlanState> | undefined {
  if (!isObject(data) || !isObject(data.plans)) return undefined
  const plans = new Map<string, PlanState>()
  const validPlanEntry = validators().planEntry
  for (const [name, entry] of Object.entries(data.plans)) {
    if (!validPlanEntry(entry)) {
      plans.set(name, { kind: 'invalid' })
      continue
    }
    const plan = entry as PlanEntry
    const at = `plans.yaml: plans.${name}`
    const overage = plan.overage === 'allow'
    if (plan.custom === true && plan.perMinute === undefined && plan.perDay === undefined && plan.perMonth === undefined) {
      const shadowOk = plan.shadow === undefined || checkShadow(`${at}.shadow`, plan.shadow, undefined, problems) !== undefined
      plans.set(name, shadowOk ? { kind: 'custom', overage } : { kind: 'invalid' })
    } else if (plan.custom === undefined && plan.perMinute !== undefined && plan.perDay !== undefined) {
      const enforced: Limits = { perMinute: plan.perMinute, perDay: plan.perDay, ...(plan.perMonth === undefined ? {} : { perMonth: plan.perMonth, overage }) }
      if (overage && plan.perMonth === undefined) {
        problems.add(`${at}.overage: allow needs a perMonth: overage is what is admitted past the month's quota`)
        plans.set(name, { kind: 'invalid' })
        continue
      }
      if (!checkDayCoversMinute(at, enforced, problems) || !monthCoversDay(at, enforced, problems)) {
        plans.set(name, { kind: 'invalid' })
        continue
      }
      const shadow = plan.shadow === undefined ? undefined : checkShadow(`${at}.shadow`, plan.shadow, enforced, problems)
      if (plan.shadow !== undefined && shadow === undefined) plans.set(name, { kind: 'invalid' })
      else plans.set(name, { kind: 'fixed', limits: shadow === undefined ? enforced : { ...enforced, shadow } })
    } else {
      plans.set(name, { kind: 'invalid' })
      problems.add(`${at}: needs perMinute and perDay (perMonth optional), or custom: true (not both)`)
    }
  }
  return plans
}

/** The rules of plans.yaml's other sections that span fields (their shape is the schema's). */
function checkPolicies (plansFile: PlansFile, problems: ProblemList): BanPolicy {
  checkDayCoversMinute('plans.yaml: anonymous', plansFile.anonymous, problems)
  const ban = { ...DEFAULT_BAN_POLICY, ...plansFile.ban }
  if (ban.maxDurationSeconds < ban.durationSeconds) {
    const given = (field: keyof BanPolicy): string => plansFile.ban?.[field] === undefined ? ', the default' : ''
    problems.add(`plans.yaml: ban: maxDurationSeconds (${ban.maxDurationSeconds}${given('maxDurationSeconds')}) must be at least ` +
      `durationSeconds (${ban.durationSeconds}${given('durationSeconds')}): the cap of a ban cannot be shorter than its first duration`)
  }
  return ban
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
    routes.push({ method: r.method, path: r.path, deprecated, stability: r.stability, cost: r.cost ?? 1 })
  })
  return routes
}

/** webhooks.yaml, when there is one: its shape, then its rules and secrets (webhooks/config.ts). */
function readWebhooks (text: string | undefined, secrets: SecretReader, problems: ProblemList): WebhooksConfig | undefined {
  if (text === undefined) return undefined
  const data = readYaml(WEBHOOKS_FILE, text, problems)
  if (data === MALFORMED) return undefined
  const validWebhooksFile = webhooksFileValidator()
  if (!validWebhooksFile(data)) {
    for (const e of validWebhooksFile.errors ?? []) problems.add(describe(WEBHOOKS_FILE, e))
    return undefined
  }
  return checkWebhooks(data satisfies WebhooksFile, secrets, (problem) => problems.add(problem))
}

/**
 * Checks one config; throws ConfigError listing every problem found (capped at `maxProblems`).
 * `secrets`: where webhooks.yaml's secrets are read (the environment and secret files by default).
 */
export function validateConfig (texts: ConfigTexts, maxProblems = DEFAULT_MAX_REPORTED_PROBLEMS, secrets: SecretReader = PROCESS_SECRETS): ValidatedConfig {
  const problems = new ProblemList(maxProblems)
  const plansFile = readFile('plans.yaml', texts['plans.yaml'], problems)
  const keysFile = readFile('keys.yaml', texts['keys.yaml'], problems)
  const routesFile = readFile('routes.yaml', texts['routes.yaml'], problems)

  const plans = checkPlans(plansFile.data, problems)
  const ban = plansFile.valid ? checkPolicies(plansFile.data as PlansFile, problems) : DEFAULT_BAN_POLICY
  const keys = keysFile.valid ? checkKeys((keysFile.data as KeysFile).keys, plans, problems) : []
  const routes = routesFile.valid ? checkRoutes(routesFile.data as RoutesFile, problems) : []
  const webhooks = readWebhooks(texts[WEBHOOKS_FILE], secrets, problems)

  if (problems.count > 0 || !plansFile.valid || plans === undefined) throw new ConfigError(problems.report())
  const hash = createHash('sha256')
    .update(texts['plans.yaml']).update('\0').update(texts['keys.yaml']).update('\0').update(texts['routes.yaml'])
  // With webhooks, their file and the secrets read (a rotated secret file is a new config); without, the version is the three files'.
  if (webhooks !== undefined) hash.update('\0').update(texts[WEBHOOKS_FILE] ?? '').update('\0').update(webhooks.endpoints.map((e) => e.secrets.join(' ')).join('\0'))
  const version = hash.digest('hex').slice(0, 12)
  return {
    version,
    plans: [...plans].map(([name, plan]) => [name, plan.kind === 'fixed' ? plan.limits : undefined]),
    anonymous: { ipv6Prefix: DEFAULT_IPV6_PREFIX, ...(plansFile.data as PlansFile).anonymous },
    ban,
    keys,
    routes,
    ...(webhooks === undefined ? {} : { webhooks })
  }
}

function freezeLimits (limits: Limits): Limits {
  if (limits.shadow !== undefined) Object.freeze(limits.shadow)
  return Object.freeze(limits)
}

/** A worker's webhooks arrive as a plain structured-clone copy: frozen here. */
function freezeWebhooks (webhooks: WebhooksConfig): WebhooksConfig {
  for (const endpoint of webhooks.endpoints) {
    Object.freeze(endpoint.events)
    Object.freeze(endpoint.secrets)
    Object.freeze(endpoint)
  }
  for (const list of [webhooks.endpoints, webhooks.thresholds, webhooks.overageSteps, webhooks.expiringDays]) Object.freeze(list)
  return Object.freeze(webhooks)
}

/** A config's keys, frozen and indexed by digest and by id, filled in as they arrive. */
export class KeyIndex {
  readonly byDigest = new Map<string, KeyRecord>()
  readonly byId = new Map<string, KeyRecord>()

  /** Adds one record (a worker's arrives as a plain structured-clone copy: it is frozen here). */
  add (digest: string, record: KeyRecord): void {
    freezeLimits(record.limits)
    Object.freeze(record.scopes)
    Object.freeze(record)
    this.byDigest.set(digest, record)
    this.byId.set(record.id, record)
  }

  addAll (keys: Iterable<[string, KeyRecord]>): this {
    for (const [digest, record] of keys) this.add(digest, record)
    return this
  }
}

/** The snapshot of a validated config, everything frozen; `loadedAt` is the caller's clock. */
export function buildSnapshot (config: ConfigWithoutKeys, keys: KeyIndex, loadedAt: number): ConfigSnapshot {
  return Object.freeze({
    version: config.version,
    loadedAt,
    plans: new Map(config.plans.map(([name, limits]) => [name, limits === undefined ? undefined : freezeLimits(limits)])),
    anonymous: Object.freeze(config.anonymous),
    ban: Object.freeze(config.ban),
    keysByDigest: keys.byDigest,
    keysById: keys.byId,
    routes: Object.freeze(config.routes.map((r) => Object.freeze({ ...r, deprecated: r.deprecated === undefined ? undefined : Object.freeze(r.deprecated) }))),
    webhooks: config.webhooks === undefined ? undefined : freezeWebhooks(config.webhooks)
  })
}

/** Validates and freezes one config in one step (tests, the CLI); throws ConfigError listing every problem found. */
export function parseConfig (texts: ConfigTexts, loadedAt = 0, secrets: SecretReader = PROCESS_SECRETS, maxProblems = DEFAULT_MAX_REPORTED_PROBLEMS): ConfigSnapshot {
  const { keys, ...config } = validateConfig(texts, maxProblems, secrets)
  return buildSnapshot(config, new KeyIndex().addAll(keys), loadedAt)
}
