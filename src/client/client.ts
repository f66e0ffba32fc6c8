// A typed client for the Pet Store interface that calls it the way the interface asks: on 429 it
// waits Retry-After and backs off exponentially with jitter (bounded), never retries a banned key
// before its ban ends nor a used-up monthly quota at all (quota_exceeded: it renews at 00:00 UTC on
// the 1st), reports the rate-limit headers (and the overage past a soft quota), warns once per deprecated operation, and warns
// once when the API key has less than a week left (`X-API-Key-Expires`).
// Types come from openapi-types.ts, generated from the gateway's OpenAPI document (`npm run openapi`).
import createClient from 'openapi-fetch'
import type { components, operations, paths } from './openapi-types.js'

export const DEFAULT_MAX_RETRIES = 5
export const DEFAULT_BASE_DELAY_MS = 250
export const DEFAULT_MAX_BACKOFF_MS = 10_000
/** A 429 asking for a longer wait than this is returned to the caller instead of being waited out. */
export const DEFAULT_MAX_WAIT_MS = 120_000
/** Warn when the key expires sooner than this (it is answered 401 key_expired from then on). */
export const DEFAULT_KEY_EXPIRY_WARNING_MS = 7 * 24 * 3600 * 1000

export type Pet = components['schemas']['Pet']
export type NewPet = components['schemas']['NewPet']
export type Order = components['schemas']['Order']
export type PetStatus = components['schemas']['PetStatus']
export type ErrorBody = components['schemas']['Error']
export type ListPetsQuery = NonNullable<operations['listPets']['parameters']['query']>
export type ListOrdersQuery = NonNullable<operations['listOrders']['parameters']['query']>
export type OperationId = keyof operations

export interface RateLimitInfo {
  /** Limit of the window that binds now. */
  readonly limit: number
  /** Requests left in that window. */
  readonly remaining: number
  /** Unix seconds when that window next frees capacity. */
  readonly reset: number
  /** The IETF `RateLimit-Policy` field, as sent (with a `month` policy for a key with a monthly quota). */
  readonly policy: string | undefined
  /** `X-Quota-Overage`: units used past the monthly quota this month on a plan that admits overage (billed); undefined within it. */
  readonly overage: number | undefined
}

export interface LifecycleInfo {
  /** When the operation was deprecated (RFC 9745 `Deprecation`); undefined when it is not. */
  readonly deprecatedSince: Date | undefined
  /** When it is removed (RFC 8594 `Sunset`). */
  readonly sunset: Date | undefined
  /** The `rel="successor-version"` link. */
  readonly successor: string | undefined
  /** `X-API-Stability`: `experimental`, `beta`, or undefined for stable. */
  readonly stability: string | undefined
}

export interface CallInfo {
  readonly operationId: OperationId
  readonly status: number
  readonly requestId: string | undefined
  readonly rateLimit: RateLimitInfo | undefined
  readonly lifecycle: LifecycleInfo
  /** Requests sent for this call (1 + retries). */
  readonly attempts: number
  /** Milliseconds waited before each retry. */
  readonly waits: readonly number[]
  /** When the API key expires (`X-API-Key-Expires`); undefined for a key without an expiry date. */
  readonly keyExpiresAt: Date | undefined
}

export interface Result<T> {
  readonly data: T
  readonly info: CallInfo
}

export interface Page<T> extends Result<T[]> {
  /** Query of the next page, from `Link: rel="next"`; undefined on the last page. */
  readonly next: Record<string, string> | undefined
}

export interface DeprecationWarningInfo {
  readonly operationId: OperationId
  readonly message: string
  readonly lifecycle: LifecycleInfo
}

export interface KeyExpiryWarningInfo {
  readonly expiresAt: Date
  readonly message: string
}

export interface PetStoreClientOptions {
  /** Base address including the version segment, e.g. `https://petstore.example/v1`. */
  baseUrl: string
  apiKey: string
  /** Retries of a 429 before it is returned as an error. */
  maxRetries?: number
  /** First backoff step; doubles on each retry, capped at maxBackoffMs, fully jittered. */
  baseDelayMs?: number
  maxBackoffMs?: number
  maxWaitMs?: number
  /** Injected for tests and virtual clocks. */
  sleep?: (ms: number) => Promise<void>
  random?: () => number
  fetch?: (request: Request) => Promise<Response>
  /** Called once per deprecated operation. Default: process.emitWarning (DeprecationWarning). */
  onDeprecation?: (warning: DeprecationWarningInfo) => void
  /** Called once when the key has less than `keyExpiryWarningMs` left. Default: console.warn. */
  onKeyExpiry?: (warning: KeyExpiryWarningInfo) => void
  keyExpiryWarningMs?: number
  /** Unix ms now, for the expiry warning; injected for tests. Default Date.now. */
  now?: () => number
  /** Called after every response that carried rate-limit headers. */
  onRateLimit?: (info: RateLimitInfo, operationId: OperationId) => void
}

/** A non-2xx answer, after any retries: the Error body and what the call learnt. */
export class PetStoreError extends Error {
  readonly status: number
  readonly code: string
  readonly retryAfter: number | undefined
  readonly info: CallInfo

  constructor (body: ErrorBody | undefined, status: number, retryAfter: number | undefined, info: CallInfo) {
    super(body?.message ?? `HTTP ${status}`)
    this.name = 'PetStoreError'
    this.status = status
    this.code = body?.code ?? 'unknown'
    this.retryAfter = retryAfter
    this.info = info
  }
}

interface Attempts {
  count: number
  waits: number[]
}

function sleepFor (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function integerHeader (headers: Headers, name: string): number | undefined {
  const value = headers.get(name)
  if (value === null || !/^\d+$/.test(value.trim())) return undefined
  return Number(value)
}

/** Link header → rel → target (RFC 8288; our values never contain commas inside the brackets). */
export function parseLinks (value: string | null): Map<string, string> {
  const links = new Map<string, string>()
  if (value === null) return links
  for (const part of value.split(',')) {
    const match = /^\s*<([^>]*)>\s*;\s*rel="?([^";]+)"?/.exec(part)
    if (match?.[1] !== undefined && match[2] !== undefined) {
      for (const rel of match[2].trim().split(/\s+/)) links.set(rel, match[1])
    }
  }
  return links
}

export function rateLimitInfo (headers: Headers): RateLimitInfo | undefined {
  const limit = integerHeader(headers, 'x-ratelimit-limit')
  const remaining = integerHeader(headers, 'x-ratelimit-remaining')
  const reset = integerHeader(headers, 'x-ratelimit-reset')
  if (limit === undefined || remaining === undefined || reset === undefined) return undefined
  return { limit, remaining, reset, policy: headers.get('ratelimit-policy') ?? undefined, overage: integerHeader(headers, 'x-quota-overage') }
}

export function lifecycleInfo (headers: Headers): LifecycleInfo {
  const deprecation = headers.get('deprecation')
  const sunset = headers.get('sunset')
  const seconds = deprecation === null ? undefined : /^@(-?\d+)$/.exec(deprecation.trim())?.[1]
  return {
    deprecatedSince: seconds === undefined ? undefined : new Date(Number(seconds) * 1000),
    sunset: sunset === null ? undefined : new Date(sunset),
    successor: parseLinks(headers.get('link')).get('successor-version'),
    stability: headers.get('x-api-stability') ?? undefined
  }
}

function defaultKeyExpiryHandler (warning: KeyExpiryWarningInfo): void {
  console.warn(warning.message)
}

/** `X-API-Key-Expires` (an IMF-fixdate) → its instant; undefined when absent or unreadable. */
export function keyExpiry (headers: Headers): Date | undefined {
  const value = headers.get('x-api-key-expires')
  if (value === null) return undefined
  const at = new Date(value)
  return Number.isNaN(at.getTime()) ? undefined : at
}

function defaultDeprecationHandler (warning: DeprecationWarningInfo): void {
  process.emitWarning(warning.message, { type: 'DeprecationWarning', code: 'PETSTORE_DEPRECATED_OPERATION' })
}

export class PetStoreClient {
  /** Rate-limit state from the latest response. */
  rateLimit: RateLimitInfo | undefined
  private readonly http
  private readonly basePath: string
  private readonly options: Required<Omit<PetStoreClientOptions, 'onRateLimit' | 'fetch'>> & Pick<PetStoreClientOptions, 'onRateLimit'>
  private readonly send: (request: Request) => Promise<Response>
  private readonly warned = new Set<OperationId>()
  private expiryWarned = false

  constructor (options: PetStoreClientOptions) {
    const baseUrl = options.baseUrl.replace(/\/+$/, '')
    this.basePath = new URL(baseUrl).pathname
    this.options = {
      baseUrl,
      apiKey: options.apiKey,
      maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
      baseDelayMs: options.baseDelayMs ?? DEFAULT_BASE_DELAY_MS,
      maxBackoffMs: options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS,
      maxWaitMs: options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
      sleep: options.sleep ?? sleepFor,
      random: options.random ?? Math.random,
      onDeprecation: options.onDeprecation ?? defaultDeprecationHandler,
      onKeyExpiry: options.onKeyExpiry ?? defaultKeyExpiryHandler,
      keyExpiryWarningMs: options.keyExpiryWarningMs ?? DEFAULT_KEY_EXPIRY_WARNING_MS,
      now: options.now ?? Date.now,
      onRateLimit: options.onRateLimit
    }
    this.send = options.fetch ?? ((request) => fetch(request))
    this.http = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${options.apiKey}` } })
  }

  async listPets (query: ListPetsQuery = {}): Promise<Page<Pet>> {
    const attempts = this.attempts()
    const { data, error, response } = await this.http.GET('/pets', { params: { query }, fetch: (r) => this.politeFetch(r, attempts) })
    const info = this.observe('listPets', response, attempts)
    if (data === undefined) throw this.failure(error, response, info)
    return { data, info, next: this.nextQuery(response, '/pets') }
  }

  async createPet (pet: NewPet): Promise<Result<Pet>> {
    const attempts = this.attempts()
    const { data, error, response } = await this.http.POST('/pets', { body: pet, fetch: (r) => this.politeFetch(r, attempts) })
    const info = this.observe('createPet', response, attempts)
    if (data === undefined) throw this.failure(error, response, info)
    return { data, info }
  }

  /** Deprecated by the service: the first call warns (see `onDeprecation`). */
  async getPet (petId: number): Promise<Result<Pet>> {
    const attempts = this.attempts()
    const { data, error, response } = await this.http.GET('/pets/{petId}', { params: { path: { petId } }, fetch: (r) => this.politeFetch(r, attempts) })
    const info = this.observe('getPet', response, attempts)
    if (data === undefined) throw this.failure(error, response, info)
    return { data, info }
  }

  async listOrders (query: ListOrdersQuery = {}): Promise<Page<Order>> {
    const attempts = this.attempts()
    const { data, error, response } = await this.http.GET('/store/orders', { params: { query }, fetch: (r) => this.politeFetch(r, attempts) })
    const info = this.observe('listOrders', response, attempts)
    if (data === undefined) throw this.failure(error, response, info)
    return { data, info, next: this.nextQuery(response, '/store/orders') }
  }

  /** Every pet matching `query`, page after page, following `Link: rel="next"` until there is none. */
  async * allPets (query: ListPetsQuery = {}): AsyncGenerator<Pet, void, undefined> {
    let next: ListPetsQuery | undefined = query
    while (next !== undefined) {
      const page: Page<Pet> = await this.listPets(next)
      yield * page.data
      next = page.next === undefined ? undefined : toListPetsQuery(page.next)
    }
  }

  private attempts (): Attempts {
    return { count: 0, waits: [] }
  }

  /** Sends the request, waiting out 429s as the interface asks; returns the last response. */
  private async politeFetch (request: Request, attempts: Attempts): Promise<Response> {
    const { maxRetries, baseDelayMs, maxBackoffMs, maxWaitMs } = this.options
    for (;;) {
      attempts.count++
      const response = await this.send(request.clone())
      if (response.status !== 429 || attempts.count > maxRetries) return response
      const text = await response.text()
      const replay = new Response(text, { status: response.status, statusText: response.statusText, headers: response.headers })
      const retryAfter = integerHeader(response.headers, 'retry-after')
      const code = codeOf(text)
      // A used-up month is not waited out by a client: it is handed back at once, to be told to a person.
      if (code === 'quota_exceeded') return replay
      const banned = code === 'key_banned'
      // A ban is waited out exactly (nothing sent before it ends, and no extra delay is useful);
      // a rate limit adds exponential backoff with full jitter, so many clients do not retry in step.
      const backoff = banned ? 0 : Math.floor(this.options.random() * Math.min(maxBackoffMs, baseDelayMs * 2 ** (attempts.count - 1)))
      const wait = (retryAfter ?? 0) * 1000 + (retryAfter === undefined && !banned ? Math.max(backoff, baseDelayMs) : backoff)
      if (wait > maxWaitMs || (banned && retryAfter === undefined)) return replay
      attempts.waits.push(wait)
      await this.options.sleep(wait)
    }
  }

  private observe (operationId: OperationId, response: Response, attempts: Attempts): CallInfo {
    const rateLimit = rateLimitInfo(response.headers)
    if (rateLimit !== undefined) {
      this.rateLimit = rateLimit
      this.options.onRateLimit?.(rateLimit, operationId)
    }
    const lifecycle = lifecycleInfo(response.headers)
    if ((lifecycle.deprecatedSince !== undefined || lifecycle.sunset !== undefined) && !this.warned.has(operationId)) {
      this.warned.add(operationId)
      const sunset = lifecycle.sunset === undefined ? '' : `; it will be removed on ${lifecycle.sunset.toUTCString()}`
      const successor = lifecycle.successor === undefined ? '' : `; use ${lifecycle.successor} instead`
      this.options.onDeprecation({ operationId, lifecycle, message: `Pet Store operation ${operationId} is deprecated${sunset}${successor}` })
    }
    const keyExpiresAt = keyExpiry(response.headers)
    if (keyExpiresAt !== undefined && !this.expiryWarned && keyExpiresAt.getTime() - this.options.now() < this.options.keyExpiryWarningMs) {
      this.expiryWarned = true
      const days = Math.max(0, (keyExpiresAt.getTime() - this.options.now()) / 86_400_000)
      this.options.onKeyExpiry({
        expiresAt: keyExpiresAt,
        message: `Pet Store API key expires on ${keyExpiresAt.toUTCString()} (in ${days.toFixed(1)} days); after that every request is refused with 401 key_expired: rotate it now`
      })
    }
    return {
      operationId,
      status: response.status,
      requestId: response.headers.get('x-request-id') ?? undefined,
      rateLimit,
      lifecycle,
      attempts: attempts.count,
      waits: attempts.waits,
      keyExpiresAt
    }
  }

  private failure (error: unknown, response: Response, info: CallInfo): PetStoreError {
    const body = isErrorBody(error) ? error : undefined
    return new PetStoreError(body, response.status, integerHeader(response.headers, 'retry-after'), info)
  }

  /** The query of the `rel="next"` link, which must stay on this list's path. */
  private nextQuery (response: Response, listPath: string): Record<string, string> | undefined {
    const target = parseLinks(response.headers.get('link')).get('next')
    if (target === undefined) return undefined
    const url = new URL(target, this.options.baseUrl)
    if (url.pathname !== this.basePath + listPath) {
      throw new Error(`Link rel="next" leaves the list: ${target}`)
    }
    return Object.fromEntries(url.searchParams)
  }
}

function codeOf (text: string): string | undefined {
  try {
    const body: unknown = JSON.parse(text)
    return isErrorBody(body) ? body.code : undefined
  } catch {
    return undefined
  }
}

function isErrorBody (value: unknown): value is ErrorBody {
  return typeof value === 'object' && value !== null && typeof (value as ErrorBody).code === 'string' && typeof (value as ErrorBody).message === 'string'
}

function toListPetsQuery (next: Record<string, string>): ListPetsQuery {
  const query: ListPetsQuery = {}
  if (next.cursor !== undefined) query.cursor = next.cursor
  if (next.limit !== undefined) query.limit = Number(next.limit)
  if (next.status !== undefined) query.status = next.status as PetStatus
  return query
}

export function createPetStoreClient (options: PetStoreClientOptions): PetStoreClient {
  return new PetStoreClient(options)
}
