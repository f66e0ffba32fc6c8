// The OpenAPI 3.1 description of the public interface, built from the JSON Schemas the backend
// validates with (src/backend/schemas.ts), the shared Error schema, the error catalogue
// (src/interface/errors.ts: every status, code and description) and the gateway's operation table,
// so there is no hand-kept copy to drift. Lifecycle marks (deprecation, sunset, stability) and the
// plan limits come from a config snapshot: a reload that changes them changes the document.
import { DOCS_LINK, ERROR_CODES, type ErrorCode } from '../../interface/errors.js'
import { errorBodySchema, interfaceSchemas, petIdParamsSchema, orderListQuerySchema, petListQuerySchema } from '../../interface/schemas.js'
import type { ConfigSnapshot, RouteRule } from '../config/types.js'
import { deprecationValue, successorLink, sunsetValue } from '../lifecycle/rules.js'
import { OPERATIONS, type Operation } from '../proxy/operations.js'
import { costNote, limitsParagraphs, RATE_LIMIT_HEADER_NAMES, RATE_LIMIT_HEADER_TEXT } from './limits.js'

export const OPENAPI_VERSION = '3.1.0'
export const DEFAULT_API_VERSION = '1.0.0'
export const DEFAULT_TITLE = 'Pet Store'
export const API_PREFIX = '/v1'
export const SECURITY_SCHEME = 'bearerAuth'

export type JsonObject = { [key: string]: JsonValue }
export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject

export interface OpenApiDocumentOptions {
  /** `info.version`; the interface description is numbered 1.0.0. */
  version?: string
  /** `servers[].url`; default the relative `/v1`, so the document works behind any host. */
  serverUrl?: string
  /** Production's public origin (PUBLIC_BASE_URL), listed as a second server when set. */
  publicBaseUrl?: string
  /** Staging's public origin (STAGING_BASE_URL), listed as a server when set. */
  stagingBaseUrl?: string
}

const SCHEMA_REF = '#/components/schemas/'

/** What each operation says in the document beyond method, path and schemas. */
interface OperationText {
  readonly summary: string
  readonly description: string
  readonly tag: 'pets' | 'store'
  readonly query?: object
  readonly pathParams?: object
  readonly body?: string
  readonly success: { readonly status: number, readonly schema: string, readonly description: string, readonly paged: boolean, readonly location?: boolean }
  /** Error codes (of the catalogue) this operation can answer besides those every operation can. */
  readonly errors: readonly ErrorCode[]
}

const OPERATION_TEXT: Readonly<Record<string, OperationText>> = {
  listPets: {
    summary: 'List animals',
    description: 'Animals ordered by id, optionally filtered by status. Paged: when more animals follow, the response carries `Link: <…?cursor=…&limit=…>; rel="next"`; follow it until it is absent.',
    tag: 'pets',
    query: petListQuerySchema,
    success: { status: 200, schema: 'Pets', description: 'A page of animals', paged: true },
    errors: []
  },
  createPet: {
    summary: 'Add an animal',
    description: 'Adds an animal; `status` defaults to `available`. Unknown fields are rejected.',
    tag: 'pets',
    body: 'NewPet',
    success: { status: 201, schema: 'Pet', description: 'The animal added, with its assigned `id`', paged: false, location: true },
    errors: ['invalid_body', 'payload_too_large', 'unsupported_media_type']
  },
  getPet: {
    summary: 'Get an animal',
    description: 'One animal by its identifier.',
    tag: 'pets',
    pathParams: petIdParamsSchema,
    success: { status: 200, schema: 'Pet', description: 'The animal', paged: false },
    errors: ['not_found']
  },
  listOrders: {
    summary: 'List store orders',
    description: 'Orders of the store ordered by id, paged like `GET /pets` (`limit`, `cursor`, `Link: rel="next"`). ' +
      'No operation of this API creates orders yet, so the list is empty unless the operators have loaded orders into the store; ' +
      'the operation is experimental and may change when ordering arrives.',
    tag: 'store',
    query: orderListQuerySchema,
    success: { status: 200, schema: 'Orders', description: 'A page of orders', paged: true },
    errors: []
  }
}

/**
 * Codes any operation can answer, whatever it does: the edge (a malformed URL or request, Node's
 * parser refusing headers or a slow request), authentication, the limiter and the proxy.
 */
const COMMON_CODES: readonly ErrorCode[] = [
  'invalid_parameter', 'invalid_request', 'unauthorized', 'key_expired', 'insufficient_scope', 'request_timeout',
  'rate_limited', 'key_banned', 'quota_exceeded', 'headers_too_large', 'internal_error', 'upstream_unavailable', 'unavailable', 'upstream_timeout'
]
/** Answered by Node's HTTP parser on the raw socket, before the gateway's pipeline: no rate-limit headers. */
const RAW_SOCKET = new Set<ErrorCode>(['request_timeout', 'headers_too_large'])
/** May come without rate-limit headers: answered before the limiter decided (503 on shutdown or store failure), a 500 anywhere, or on the raw socket. */
const MAY_LACK_RATE_LIMIT_HEADERS = new Set<ErrorCode>(['internal_error', 'unavailable', ...RAW_SOCKET])
/** A 503 on shutdown has no request id. */
const MAY_LACK_REQUEST_ID = new Set<ErrorCode>(['unavailable'])
/** Answered before the lifecycle step, so without its headers: screening, authentication, the limiter, shutdown, the parser. */
const BEFORE_LIFECYCLE = new Set<ErrorCode>(['invalid_request', 'unauthorized', 'key_expired', 'insufficient_scope', 'rate_limited', 'key_banned', 'quota_exceeded', 'unavailable', ...RAW_SOCKET])
/** Answered before the lifecycle step or after it: a malformed URL is refused by the screen, a bad parameter by the backend. */
const EITHER_SIDE_OF_LIFECYCLE = new Set<ErrorCode>(['invalid_parameter'])

function clone<T> (value: T): JsonValue {
  return JSON.parse(JSON.stringify(value)) as JsonValue
}

/** Drops the Fastify-registry `$id` and rewrites `$ref: 'Name#'` to the document's components. */
function toComponentSchema (value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(toComponentSchema)
  if (value === null || typeof value !== 'object') return value
  const out: JsonObject = {}
  for (const [key, inner] of Object.entries(value)) {
    if (key === '$id') continue
    if (key === '$ref' && typeof inner === 'string' && /^[A-Za-z]+#$/.test(inner)) {
      out.$ref = SCHEMA_REF + inner.slice(0, -1)
      continue
    }
    out[key] = toComponentSchema(inner)
  }
  return out
}

/** The schemas that are resources (not Fastify's query/params wrappers, which become parameters). */
const RESOURCE_SCHEMAS = new Set(['PetStatus', 'NewPet', 'Pet', 'Pets', 'Order', 'Orders'])

function componentSchemas (): JsonObject {
  const schemas: JsonObject = {}
  for (const schema of interfaceSchemas) {
    if (RESOURCE_SCHEMAS.has(schema.$id)) schemas[schema.$id] = toComponentSchema(clone(schema))
  }
  schemas.Error = toComponentSchema(clone(errorBodySchema))
  return schemas
}

/** Turns a Fastify `querystring`/`params` object schema into OpenAPI parameters, one per property. */
function parameters (objectSchema: object, location: 'query' | 'path'): JsonValue[] {
  const wrapper = toComponentSchema(clone(objectSchema)) as JsonObject
  const required = new Set((wrapper.required as string[] | undefined) ?? [])
  const properties = (wrapper.properties ?? {}) as JsonObject
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...schema } = property as JsonObject
    return {
      name,
      in: location,
      required: location === 'path' || required.has(name),
      ...(description === undefined ? {} : { description }),
      schema
    }
  })
}

function header (description: string, schema: JsonObject, example?: JsonValue): JsonObject {
  return { description, schema, ...(example === undefined ? {} : { example }) }
}

// Inlined where used: a Reference Object cannot carry `required`, which differs per response.
const HEADERS: Readonly<Record<string, JsonObject>> = {
  ...RATE_LIMIT_HEADER_TEXT,
  'Retry-After': header('Seconds to wait before retrying (integer ≥ 1)', { type: 'integer', minimum: 1 }, 12),
  'X-Request-Id': header('Identifier of this request, for support and logs', { type: 'string' }),
  'WWW-Authenticate': header('The bearer challenge; with `error="invalid_token"` when a token was presented (and `error_description="The API key expired"` for an expired one), `error="insufficient_scope"` on a 403', { type: 'string' }, 'Bearer realm="petstore"'),
  'X-API-Key-Expires': header('When the API key used expires (IMF-fixdate); sent only for a key with an expiry date. From then on the key is answered `401 key_expired`: rotate it before.', { type: 'string' }, 'Wed, 02 Jan 2030 03:04:05 GMT'),
  Location: header('Path of the animal created', { type: 'string' }, '/v1/pets/1'),
  'Link-Help': header('Sent when no API key was presented: where the API is documented (this description, and the docs page)', { type: 'string', const: DOCS_LINK }, DOCS_LINK),
  'Link-Next': header('Announces the next page: `<…?cursor=…&limit=…>; rel="next"`. Absent on the last page.', { type: 'string' }, '</v1/pets?cursor=cGV0czoyMA&limit=20>; rel="next"')
}

function use (name: string, required: boolean): JsonObject {
  const found = HEADERS[name]
  if (found === undefined) throw new Error(`unknown header ${name}`)
  return { ...found, required }
}

/** The rate-limit headers, and X-Quota-Overage (sent only past a soft quota) wherever they may be. */
function rateLimitHeaders (required: boolean): JsonObject {
  return { ...Object.fromEntries(RATE_LIMIT_HEADER_NAMES.map((n) => [n, use(n, required)])), 'X-Quota-Overage': use('X-Quota-Overage', false) }
}

/** Deprecation / Sunset / Link / X-API-Stability of one route, with the values its config gives. */
function lifecycleHeaders (rule: RouteRule | undefined, paged: boolean): JsonObject {
  const headers: JsonObject = {}
  if (rule?.deprecated !== undefined) {
    const deprecation = deprecationValue(rule.deprecated.since)
    const sunset = sunsetValue(rule.deprecated.sunset)
    headers.Deprecation = { description: 'RFC 9745: deprecated since this Unix time', required: true, schema: { type: 'string', const: deprecation }, example: deprecation }
    headers.Sunset = { description: 'RFC 8594: removed from this instant (then answered 410)', required: true, schema: { type: 'string', const: sunset }, example: sunset }
    if (rule.deprecated.successor !== undefined) {
      const link = successorLink(rule.deprecated.successor)
      // On a paged list the same field may also announce the next page.
      const schema: JsonObject = paged ? { type: 'string', pattern: link.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') } : { type: 'string', const: link }
      headers.Link = { description: paged ? 'The successor of this operation, and the next page when there is one' : 'The successor of this operation', required: true, schema, example: link }
    }
  }
  if (rule?.stability !== undefined) {
    headers['X-API-Stability'] = { description: 'Stability mark: may change without a new version', required: true, schema: { type: 'string', const: rule.stability }, example: rule.stability }
  }
  return headers
}

/** `lifecycle`'s headers, required, optional or left out, as the codes of one status allow. */
function lifecycleFor (codes: readonly ErrorCode[], lifecycle: JsonObject): JsonObject {
  if (codes.every((c) => BEFORE_LIFECYCLE.has(c))) return {}
  if (codes.every((c) => !BEFORE_LIFECYCLE.has(c) && !EITHER_SIDE_OF_LIFECYCLE.has(c))) return lifecycle
  return Object.fromEntries(Object.entries(lifecycle).map(([name, h]) => [name, { ...(h as JsonObject), required: false }]))
}

/** What the catalogue says of these codes, one status's worth. */
function statusDescription (codes: readonly ErrorCode[]): string {
  const [only] = codes
  if (codes.length === 1 && only !== undefined) return `${ERROR_CODES[only].description} (\`${only}\`)`
  return codes.map((c) => `\`${c}\`: ${ERROR_CODES[c].description}`).join('; ')
}

function errorResponse (status: number, codes: readonly ErrorCode[], lifecycle: JsonObject): JsonObject {
  const headers: JsonObject = {
    'X-Request-Id': use('X-Request-Id', !codes.some((c) => MAY_LACK_REQUEST_ID.has(c))),
    ...rateLimitHeaders(!codes.some((c) => MAY_LACK_RATE_LIMIT_HEADERS.has(c))),
    ...lifecycleFor(codes, lifecycle)
  }
  // Not on a 401: there is no valid key whose expiry could be told.
  if (status !== 401) headers['X-API-Key-Expires'] = use('X-API-Key-Expires', false)
  if (status === 401 || status === 403) headers['WWW-Authenticate'] = use('WWW-Authenticate', true)
  if (status === 401) headers.Link = use('Link-Help', false)
  if (status === 429) headers['Retry-After'] = use('Retry-After', true)
  return {
    description: statusDescription(codes),
    headers,
    content: {
      'application/json': {
        schema: {
          allOf: [
            { $ref: SCHEMA_REF + 'Error' },
            { properties: { code: { enum: [...codes] }, status: { const: status } } }
          ]
        }
      }
    }
  }
}

/** The codes an operation can answer, by status (ascending), each status's codes in catalogue order. */
export function errorCodesByStatus (codes: Iterable<ErrorCode>): Map<number, ErrorCode[]> {
  const wanted = new Set(codes)
  const byStatus = new Map<number, ErrorCode[]>()
  const ordered = (Object.keys(ERROR_CODES) as ErrorCode[]).filter((c) => wanted.has(c))
  for (const code of ordered.sort((a, b) => ERROR_CODES[a].status - ERROR_CODES[b].status)) {
    const status = ERROR_CODES[code].status
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  return byStatus
}

function isoDate (ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}

function operationObject (op: Operation, text: OperationText, rule: RouteRule | undefined): JsonObject {
  const lifecycle = lifecycleHeaders(rule, text.success.paged)
  const successHeaders: JsonObject = { 'X-Request-Id': use('X-Request-Id', true), ...rateLimitHeaders(true), 'X-API-Key-Expires': use('X-API-Key-Expires', false), ...lifecycle }
  if (text.success.paged && successHeaders.Link === undefined) successHeaders.Link = use('Link-Next', false)
  if (text.success.location === true) successHeaders.Location = use('Location', true)

  const codes = errorCodesByStatus([...COMMON_CODES, ...text.errors, ...(rule?.deprecated === undefined ? [] : ['endpoint_removed' as const])])
  const responses: JsonObject = {
    [String(text.success.status)]: {
      description: text.success.description,
      headers: successHeaders,
      content: { 'application/json': { schema: { $ref: SCHEMA_REF + text.success.schema } } }
    }
  }
  for (const [status, statusCodes] of codes) responses[String(status)] = errorResponse(status, statusCodes, lifecycle)

  const notes: string[] = [text.description]
  const out: JsonObject = { operationId: op.operationId, summary: text.summary, tags: [text.tag] }
  if (rule?.deprecated !== undefined) {
    const successor = rule.deprecated.successor === undefined ? '' : ` Use \`GET ${rule.deprecated.successor.replace(API_PREFIX, '')}\` (with the \`status\` filter) instead.`
    notes.push(`**Deprecated** since ${isoDate(rule.deprecated.since)}; removed on ${isoDate(rule.deprecated.sunset)} (the \`Sunset\` header), after which it answers \`410 endpoint_removed\`.${successor}`)
    out.deprecated = true
    out['x-sunset'] = new Date(rule.deprecated.sunset).toISOString()
  }
  const cost = costNote(rule)
  if (cost !== undefined) {
    notes.push(cost)
    out['x-rate-limit-cost'] = rule?.cost ?? 1
  }
  if (rule?.stability !== undefined) {
    notes.push(`**Stability: ${rule.stability}.** This operation may change without a new API version (\`X-API-Stability: ${rule.stability}\`).`)
    out['x-api-stability'] = rule.stability
  }
  out.description = notes.join('\n\n')
  const params = [
    ...(text.pathParams === undefined ? [] : parameters(text.pathParams, 'path')),
    ...(text.query === undefined ? [] : parameters(text.query, 'query'))
  ]
  if (params.length > 0) out.parameters = params
  if (text.body !== undefined) {
    out.requestBody = { required: true, content: { 'application/json': { schema: { $ref: SCHEMA_REF + text.body } } } }
  }
  out.responses = responses
  return out
}

/** `/v1/pets/:petId` → `/pets/{petId}` (relative to the `/v1` server). */
export function openApiPath (fastifyPath: string): string {
  const relative = fastifyPath.startsWith(API_PREFIX) ? fastifyPath.slice(API_PREFIX.length) : fastifyPath
  return relative.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}

function infoDescription (snapshot: ConfigSnapshot): string {
  return [
    'Catalogue of animals (pets) and orders of the store, behind an API gateway.',
    '**Authentication.** Every operation needs an API key sent as `Authorization: Bearer <key>`. Keys are issued by the operators of the gateway. ' +
      'A key with an expiry date says when on every response (`X-API-Key-Expires`) and is answered `401 key_expired` from then on. ' +
      'A key may be limited to reading (GET, HEAD: scope `read`) or writing (every other method: scope `write`); a method outside its scopes is `403 insufficient_scope`.',
    ...limitsParagraphs(snapshot),
    '**Lifecycle.** Deprecated operations carry `Deprecation`, `Sunset` and a `Link` to their successor; after the sunset they answer `410`. Operations marked `experimental` or `beta` carry `X-API-Stability`.',
    '**Paging.** List operations take `limit` and an opaque `cursor`; the next page is announced by `Link: <…>; rel="next"`.'
  ].join('\n\n')
}

/** This gateway (relative, so the document works behind any host), then each configured environment. */
function serversOf (opts: OpenApiDocumentOptions): JsonObject[] {
  const servers: JsonObject[] = [{ url: opts.serverUrl ?? API_PREFIX, description: 'This gateway' }]
  const origin = (url: string): string => url.replace(/\/+$/, '') + API_PREFIX
  if (opts.publicBaseUrl !== undefined) servers.push({ url: origin(opts.publicBaseUrl), description: 'Production' })
  if (opts.stagingBaseUrl !== undefined) servers.push({ url: origin(opts.stagingBaseUrl), description: 'Staging' })
  return servers
}

/** The OpenAPI 3.1 document for one config snapshot. Pure: same snapshot, same document. */
export function buildOpenApiDocument (snapshot: ConfigSnapshot, opts: OpenApiDocumentOptions = {}): JsonObject {
  const paths: JsonObject = {}
  for (const op of OPERATIONS) {
    const text = OPERATION_TEXT[op.operationId]
    if (text === undefined) throw new Error(`operation ${op.operationId} has no description`)
    const rule = snapshot.routes.find((r) => r.path === op.path && r.method === op.method)
    const path = openApiPath(op.path)
    const item = (paths[path] ?? {}) as JsonObject
    item[op.method.toLowerCase()] = operationObject(op, text, rule)
    paths[path] = item
  }
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: DEFAULT_TITLE,
      version: opts.version ?? DEFAULT_API_VERSION,
      description: infoDescription(snapshot)
    },
    servers: serversOf(opts),
    security: [{ [SECURITY_SCHEME]: [] }],
    tags: [
      { name: 'pets', description: 'The catalogue of animals' },
      { name: 'store', description: 'Orders of the store' }
    ],
    paths,
    components: {
      schemas: componentSchemas(),
      securitySchemes: {
        [SECURITY_SCHEME]: { type: 'http', scheme: 'bearer', description: 'The API key as a bearer token: `Authorization: Bearer <key>`' }
      }
    }
  }
}
