// webhooks.yaml: the endpoints the gateway tells about quota and key events, checked the way the
// other config files are (every problem named by file and field, the whole config refused on any),
// because it is loaded with them (config/loader.ts) and swapped in with them on a reload. The file is
// optional: without it there are no webhooks. Endpoints come only from this file; an endpoint must be
// HTTPS unless it is on a loopback address; its signing secrets come from the environment or a
// secret file (never the file itself), are read at load and must be `whsec_` + base64.
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { Ajv } from 'ajv'
import { onFirstUse } from '../../shared/on-first-use.js'

export const WEBHOOKS_FILE = 'webhooks.yaml'
export const WEBHOOK_EVENTS = ['quota.threshold', 'quota.exceeded', 'key.banned', 'key.expiring'] as const
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number]

/** Shares of perMonth whose crossing is told (`quota.threshold`) when the file names none. */
export const DEFAULT_THRESHOLDS: readonly number[] = [0.8, 1]
/** Days before a key's expiry at which `key.expiring` is told, when the file names none. */
export const DEFAULT_EXPIRING_DAYS: readonly number[] = [7, 1]
/** A secret file bigger than this is not a secret. */
const MAX_SECRET_FILE_BYTES = 4096

/** Where an endpoint's signing secret is read: an environment variable's name, or a file's path. */
export type SecretSource = { readonly env: string } | { readonly file: string }

export interface WebhookEndpoint {
  /** The endpoint's name: what the CLI, the admin API and the dead letters call it. */
  readonly name: string
  readonly url: string
  readonly events: readonly WebhookEvent[]
  /** `whsec_…` secrets, the current one first; a second one (the previous, during a rotation) signs too. */
  readonly secrets: readonly string[]
}

export interface WebhooksConfig {
  readonly endpoints: readonly WebhookEndpoint[]
  /** Shares of perMonth told as `quota.threshold`, ascending (1 is the quota itself). */
  readonly thresholds: readonly number[]
  /** With `overage: allow`, further shares past the quota told as `quota.threshold` (1.5: half as much again). */
  readonly overageSteps: readonly number[]
  /** Days before an expiry told as `key.expiring`, descending. */
  readonly expiringDays: readonly number[]
}

/** How the loader reads a secret: the process's environment and files by default; tests give their own. */
export interface SecretReader {
  env: (name: string) => string | undefined
  file: (path: string) => string
}

export const PROCESS_SECRETS: SecretReader = {
  env: (name) => process.env[name],
  file (path) {
    const text = readFileSync(path, 'utf8')
    if (text.length > MAX_SECRET_FILE_BYTES) throw new Error(`larger than ${MAX_SECRET_FILE_BYTES} bytes`)
    return text
  }
}

const secretSource = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  maxProperties: 1,
  properties: {
    env: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 128 },
    file: { type: 'string', minLength: 1, maxLength: 1024 }
  }
} as const

const share = { type: 'number', exclusiveMinimum: 0, maximum: 100 } as const

export const webhooksFileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['endpoints'],
  properties: {
    endpoints: {
      type: 'array',
      maxItems: 32,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'url', 'events', 'secret'],
        properties: {
          name: { type: 'string', pattern: '^[a-z0-9][a-z0-9-]{0,62}$' },
          url: { type: 'string', minLength: 1, maxLength: 2048 },
          events: { type: 'array', minItems: 1, uniqueItems: true, items: { enum: [...WEBHOOK_EVENTS] } },
          secret: secretSource,
          previousSecret: secretSource
        }
      }
    },
    quota: {
      type: 'object',
      additionalProperties: false,
      properties: {
        thresholds: { type: 'array', minItems: 1, maxItems: 10, uniqueItems: true, items: { ...share, maximum: 1 } },
        overageSteps: { type: 'array', maxItems: 10, uniqueItems: true, items: { ...share, exclusiveMinimum: 1 } }
      }
    },
    keyExpiring: {
      type: 'object',
      additionalProperties: false,
      properties: {
        days: { type: 'array', minItems: 1, maxItems: 10, uniqueItems: true, items: { type: 'integer', minimum: 1, maximum: 365 } }
      }
    }
  }
} as const

interface EndpointEntry { name: string, url: string, events: WebhookEvent[], secret: SecretSource, previousSecret?: SecretSource }
export interface WebhooksFile {
  endpoints: EndpointEntry[]
  quota?: { thresholds?: number[], overageSteps?: number[] }
  keyExpiring?: { days?: number[] }
}

/** webhooks.yaml's validator, compiled at the first parse (not in a gateway's main thread, which parses in its worker). */
export const webhooksFileValidator = onFirstUse(() => new Ajv({ allErrors: true, strict: true }).compile<WebhooksFile>(webhooksFileSchema))

/** 127.0.0.0/8, ::1 and `localhost`: the only hosts plain HTTP may reach. */
export function isLoopbackHost (hostname: string): boolean {
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname
  if (host === 'localhost') return true
  if (isIP(host) === 4) return host.startsWith('127.')
  return host === '::1'
}

/** Why `url` may not be an endpoint, or undefined when it may. */
export function urlProblem (url: string): string | undefined {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return 'is not a URL'
  }
  if (parsed.username !== '' || parsed.password !== '') return 'must not carry credentials (sign with the secret instead)'
  if (parsed.protocol === 'https:') return undefined
  if (parsed.protocol === 'http:') return isLoopbackHost(parsed.hostname) ? undefined : `must be https:// (plain http:// only to a loopback address, not "${parsed.hostname}")`
  return `must be https:// (not ${parsed.protocol})`
}

/** `whsec_` then base64 of at least 24 bytes. */
export function isWebhookSecret (secret: string): boolean {
  if (!secret.startsWith('whsec_')) return false
  const encoded = secret.slice('whsec_'.length)
  return /^[A-Za-z0-9+/]+={0,2}$/.test(encoded) && Buffer.from(encoded, 'base64').length >= 24
}

function readSecret (at: string, source: SecretSource, reader: SecretReader, problems: (problem: string) => void): string | undefined {
  let value: string | undefined
  if ('env' in source) {
    value = reader.env(source.env)
    if (value === undefined || value.trim() === '') {
      problems(`${WEBHOOKS_FILE}: ${at}.env: environment variable ${source.env} is not set`)
      return undefined
    }
  } else {
    try {
      value = reader.file(source.file)
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : 'unreadable')
      problems(`${WEBHOOKS_FILE}: ${at}.file: cannot read ${source.file}: ${reason}`)
      return undefined
    }
  }
  const secret = value.trim()
  if (!isWebhookSecret(secret)) {
    // Never the value itself: it may be a real secret in the wrong form.
    problems(`${WEBHOOKS_FILE}: ${at}: the secret must be "whsec_" followed by the base64 of at least 24 bytes`)
    return undefined
  }
  return secret
}

/** The rules the schema cannot say (URL, secrets, unique names), on a file of the schema's shape. */
export function checkWebhooks (file: WebhooksFile, reader: SecretReader, problems: (problem: string) => void): WebhooksConfig {
  const names = new Set<string>()
  const endpoints: WebhookEndpoint[] = []
  file.endpoints.forEach((entry, index) => {
    const at = `endpoints[${index}]`
    let ok = true
    if (names.has(entry.name)) {
      problems(`${WEBHOOKS_FILE}: ${at}.name: duplicate endpoint "${entry.name}"`)
      ok = false
    }
    names.add(entry.name)
    const urlIssue = urlProblem(entry.url)
    if (urlIssue !== undefined) {
      problems(`${WEBHOOKS_FILE}: ${at}.url: ${urlIssue}`)
      ok = false
    }
    const secret = readSecret(`${at}.secret`, entry.secret, reader, problems)
    const previous = entry.previousSecret === undefined ? undefined : readSecret(`${at}.previousSecret`, entry.previousSecret, reader, problems)
    if (!ok || secret === undefined || (entry.previousSecret !== undefined && previous === undefined)) return
    endpoints.push(Object.freeze({
      name: entry.name,
      url: entry.url,
      events: Object.freeze([...entry.events]),
      secrets: Object.freeze(previous === undefined || previous === secret ? [secret] : [secret, previous])
    }))
  })
  return Object.freeze({
    endpoints: Object.freeze(endpoints),
    thresholds: Object.freeze([...(file.quota?.thresholds ?? DEFAULT_THRESHOLDS)].sort((a, b) => a - b)),
    overageSteps: Object.freeze([...(file.quota?.overageSteps ?? [])].sort((a, b) => a - b)),
    expiringDays: Object.freeze([...(file.keyExpiring?.days ?? DEFAULT_EXPIRING_DAYS)].sort((a, b) => b - a))
  })
}

/** The endpoints subscribed to `event`. */
export function endpointsFor (config: WebhooksConfig | undefined, event: WebhookEvent): WebhookEndpoint[] {
  return config === undefined ? [] : config.endpoints.filter((endpoint) => endpoint.events.includes(event))
}
