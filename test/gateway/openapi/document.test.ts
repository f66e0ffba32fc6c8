import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Validator } from '@seriousme/openapi-schema-validator'
import t from 'tap'
import { errorBodySchema, interfaceSchemas, NAME_PATTERN } from '../../../src/interface/schemas.js'
import { clientTypesText, DEFAULT_DOCUMENT_PATH, DEFAULT_TYPES_PATH, documentText, writeOpenApi } from '../../../src/cli/openapi.js'
import { loadConfigDir } from '../../../src/gateway/config/read-files.js'
import { buildOpenApiDocument, openApiPath, type JsonObject } from '../../../src/gateway/openapi/document.js'
import { OPERATIONS } from '../../../src/gateway/proxy/operations.js'
import { FIXTURE_CONFIG_DIR, SHIPPED_CONFIG_DIR, testConfig } from '../../helpers/config-fixture.js'

type Doc = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any -- walking a JSON document in assertions

const doc = buildOpenApiDocument(testConfig()) as Doc
const RATE_LIMIT_HEADERS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit']

function operations (d: Doc): Array<[string, string, Doc]> {
  const out: Array<[string, string, Doc]> = []
  for (const [path, item] of Object.entries(d.paths as Doc)) {
    for (const [method, op] of Object.entries(item as Doc)) out.push([method, path, op as Doc])
  }
  return out
}

function operation (d: Doc, operationId: string): Doc {
  const found = operations(d).find(([, , op]) => op.operationId === operationId)
  if (found === undefined) throw new Error(`no ${operationId}`)
  return found[2]
}

t.test('the description is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)', async (t) => {
  const validator = new Validator()
  const result = await validator.validate(doc as never)
  t.same(result, { valid: true })
  t.equal(validator.version, '3.1')
  t.equal(doc.openapi, '3.1.0')
  t.equal(doc.info.version, '1.0.0')
  t.same(doc.servers, [{ url: '/v1', description: 'This gateway' }])
})

t.test('the four public operations, at their paths relative to /v1, and nothing else', async (t) => {
  t.same(operations(doc).map(([method, path, op]) => `${op.operationId as string} ${method.toUpperCase()} ${path}`).sort(), [
    'createPet POST /pets',
    'getPet GET /pets/{petId}',
    'listOrders GET /store/orders',
    'listPets GET /pets'
  ])
  for (const op of OPERATIONS) t.ok(doc.paths[openApiPath(op.path)][op.method.toLowerCase()], op.operationId)
})

t.test('components.schemas are the backend schemas and the Error schema, with $id dropped and $refs rewritten', async (t) => {
  const expected: Doc = {}
  const rewrite = (value: unknown): unknown => JSON.parse(JSON.stringify(value, (key, v: unknown) => key === '$id' ? undefined : v)
    .replace(/"\$ref":"([A-Za-z]+)#"/g, '"$ref":"#/components/schemas/$1"'))
  for (const schema of interfaceSchemas) {
    if (['PetListQuery', 'OrderListQuery', 'PetIdParams'].includes(schema.$id)) continue
    expected[schema.$id] = rewrite(schema)
  }
  expected.Error = rewrite(errorBodySchema)
  t.same(doc.components.schemas, expected)
  t.equal(doc.components.schemas.NewPet.properties.name.pattern, NAME_PATTERN)
  t.same(doc.components.schemas.Pet.properties.status, { $ref: '#/components/schemas/PetStatus' })
})

t.test('parameters come from the backend query and path schemas; the body from NewPet', async (t) => {
  const listPets = operation(doc, 'listPets')
  t.same(listPets.parameters.map((p: Doc) => [p.name, p.in, p.required]), [['limit', 'query', false], ['status', 'query', false], ['cursor', 'query', false]])
  t.same(listPets.parameters[0].schema, { type: 'integer', minimum: 1, maximum: 100, default: 20 })
  t.same(operation(doc, 'listOrders').parameters.map((p: Doc) => p.name), ['limit', 'cursor'])
  const getPet = operation(doc, 'getPet')
  t.same(getPet.parameters, [{
    name: 'petId', in: 'path', required: true, description: 'Identifier of the animal',
    schema: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, format: 'int64' }
  }])
  t.same(operation(doc, 'createPet').requestBody, { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPet' } } } })
})

t.test('every response of docs/decisions.md §6 that applies, each with the Error schema and its codes', async (t) => {
  const statuses = Object.fromEntries(operations(doc).map(([, , op]) => [op.operationId, Object.keys(op.responses)]))
  // 408 and 431 are answered by Node's parser to a request for any operation (listed since the document
  // takes its errors from the catalogue; a live test asks the gateway for each code).
  t.same(statuses, {
    listPets: ['200', '400', '401', '403', '408', '429', '431', '500', '502', '503', '504'],
    createPet: ['201', '400', '401', '403', '408', '413', '415', '429', '431', '500', '502', '503', '504'],
    getPet: ['200', '400', '401', '403', '404', '408', '410', '429', '431', '500', '502', '503', '504'],
    listOrders: ['200', '400', '401', '403', '408', '429', '431', '500', '502', '503', '504']
  })
  t.same(operation(doc, 'createPet').responses['400'].content['application/json'].schema.allOf[1].properties.code, { enum: ['invalid_body', 'invalid_parameter', 'invalid_request'] })
  t.same(operation(doc, 'listPets').responses['400'].content['application/json'].schema.allOf[1].properties.code, { enum: ['invalid_parameter', 'invalid_request'] })
  t.same(operation(doc, 'listPets').responses['401'].content['application/json'].schema.allOf[1].properties.code, { enum: ['unauthorized', 'key_expired'] })
  t.same(operation(doc, 'createPet').responses['403'].content['application/json'].schema.allOf[1], { properties: { code: { enum: ['insufficient_scope'] }, status: { const: 403 } } })
  t.same(operation(doc, 'listPets').responses['429'].content['application/json'].schema, {
    allOf: [{ $ref: '#/components/schemas/Error' }, { properties: { code: { enum: ['rate_limited', 'key_banned', 'quota_exceeded'] }, status: { const: 429 } } }]
  })
  t.match(operation(doc, 'listPets').responses['429'].description, /`quota_exceeded`: The monthly quota is used up until it renews at 00:00 UTC on the 1st/)
  t.same(doc.security, [{ bearerAuth: [] }])
  t.same(doc.components.securitySchemes, { bearerAuth: { type: 'http', scheme: 'bearer', description: 'The API key as a bearer token: `Authorization: Bearer <key>`' } })
})

t.test('rate-limit headers on every response, Retry-After on 429, WWW-Authenticate on 401/403, X-API-Key-Expires but on 401, Link paging on lists', async (t) => {
  for (const [, , op] of operations(doc)) {
    for (const [status, response] of Object.entries(op.responses as Doc)) {
      const headers = (response as Doc).headers as Doc
      for (const name of RATE_LIMIT_HEADERS) {
        // 500 and 503 may be answered before the limiter decided; 408 and 431 on the raw socket, before the pipeline.
        t.equal(headers[name]?.required, !['408', '431', '500', '503'].includes(status), `${op.operationId as string} ${status} ${name}`)
      }
      t.equal(headers['X-Quota-Overage']?.required, false, `${op.operationId as string} ${status} X-Quota-Overage (only past a soft quota)`)
      t.equal(headers['Retry-After']?.required, status === '429' ? true : undefined)
      t.equal(headers['WWW-Authenticate']?.required, status === '401' || status === '403' ? true : undefined)
      t.equal(headers['X-API-Key-Expires']?.required, status === '401' ? undefined : false, `${op.operationId as string} ${status} X-API-Key-Expires`)
    }
  }
  for (const id of ['listPets', 'listOrders']) {
    const link = operation(doc, id).responses['200'].headers.Link
    t.equal(link.required, false)
    t.match(link.description, /rel="next"/)
    t.match(operation(doc, id).parameters.find((p: Doc) => p.name === 'cursor').description, /Link: rel="next"/)
  }
  t.equal(operation(doc, 'createPet').responses['201'].headers.Location.required, true)
})

t.test('getPet is deprecated with the sunset, Deprecation/Sunset/Link values and a 410 from routes.yaml', async (t) => {
  const getPet = operation(doc, 'getPet')
  t.equal(getPet.deprecated, true)
  t.equal(getPet['x-sunset'], '2030-12-05T00:00:00.000Z')
  t.match(getPet.description, /Deprecated\*\* since 2026-11-21; removed on 2030-12-05/)
  const headers = getPet.responses['200'].headers
  t.same(headers.Deprecation.schema, { type: 'string', const: `@${Date.UTC(2026, 10, 21) / 1000}` })
  t.same(headers.Sunset.schema, { type: 'string', const: 'Thu, 05 Dec 2030 00:00:00 GMT' })
  t.same(headers.Link.schema, { type: 'string', const: '</v1/pets>; rel="successor-version"' })
  t.equal(getPet.responses['410'].headers.Sunset.required, true)
  t.equal(getPet.responses['401'].headers.Sunset, undefined, 'answered before the lifecycle step')
  for (const id of ['listPets', 'createPet', 'listOrders']) t.equal(operation(doc, id).deprecated, undefined, id)
})

t.test('the stability mark of orders comes from routes.yaml', async (t) => {
  const listOrders = operation(doc, 'listOrders')
  t.equal(listOrders['x-api-stability'], 'experimental')
  t.same(listOrders.responses['200'].headers['X-API-Stability'].schema, { type: 'string', const: 'experimental' })
  t.match(listOrders.description, /Stability: experimental/)
})

t.test('another config snapshot gives another document: marks, sunset and limits follow the config', async (t) => {
  const other = buildOpenApiDocument(testConfig({
    'routes.yaml': 'routes:\n  - { method: GET, path: /v1/store/orders, stability: beta }\n  - { method: GET, path: /v1/pets, deprecated: { since: 2027-01-01, sunset: 2031-01-01 } }\n',
    'plans.yaml': 'plans:\n  free: { perMinute: 7, perDay: 70 }\n  pro: { perMinute: 8, perDay: 80 }\n  business: { perMinute: 9, perDay: 90 }\n  enterprise: { custom: true }\nanonymous: { perMinute: 3, perDay: 9 }\n'
  })) as Doc
  t.equal(operation(other, 'getPet').deprecated, undefined)
  t.same(Object.keys(operation(other, 'getPet').responses).includes('410'), false)
  t.equal(operation(other, 'listPets').deprecated, true)
  t.equal(operation(other, 'listPets')['x-sunset'], '2031-01-01T00:00:00.000Z')
  t.same(operation(other, 'listPets').responses['200'].headers.Link, operation(doc, 'listPets').responses['200'].headers.Link, 'no successor: the paging Link stays')
  const withSuccessor = buildOpenApiDocument(testConfig({
    'routes.yaml': 'routes:\n  - { method: GET, path: /v1/store/orders, deprecated: { since: 2027-01-01, sunset: 2031-01-01, successor: /v2/orders } }\n'
  })) as Doc
  const link = operation(withSuccessor, 'listOrders').responses['200'].headers.Link
  t.same(link.schema, { type: 'string', pattern: '</v2/orders>; rel="successor-version"' }, 'paged and deprecated: the successor within the paging Link')
  t.ok(new RegExp(link.schema.pattern).test('</v1/store/orders?cursor=b3JkZXJzOjE&limit=1>; rel="next", </v2/orders>; rel="successor-version"'))
  t.equal(operation(other, 'listOrders')['x-api-stability'], 'beta')
  t.match(other.info.description, /\| free \| 7 \| 70 \|\n\| pro \| 8 \| 80 \|\n\| business \| 9 \| 90 \|\n\| enterprise \| per key \| per key \|/)
  t.match(other.info.description, /\| without a valid key \(per client IP\) \| 3 \| 9 \|/)
})

t.test('monthly quotas and costs: the month policy and X-Quota-Overage described, a per-month column once a quota is configured, an operation\'s cost', async (t) => {
  const headers = operation(doc, 'listPets').responses['200'].headers
  t.match(headers['RateLimit-Policy'].description, /`month` for a key with a monthly quota.*calendar month in UTC \(from 00:00 on the 1st\), so its `w` is the length of the current month: 2419200 to 2678400/)
  t.match(headers['X-Quota-Overage'], { required: false, schema: { type: 'integer', minimum: 1 }, description: /units used past the quota this month/ })
  t.match(doc.info.description, /`429 quota_exceeded` \(whenever the month is used up, even if a shorter window is too\)/)
  t.match(doc.info.description, /\| plan \| per minute \| per day \|\n/, 'no quota configured: no month column')
  t.equal(operation(doc, 'createPet')['x-rate-limit-cost'], undefined)

  const metered = buildOpenApiDocument(testConfig({
    'plans.yaml': 'plans:\n  free: { perMinute: 7, perDay: 70, perMonth: 700 }\n  pro: { perMinute: 8, perDay: 80, perMonth: 800, overage: allow }\n  business: { perMinute: 9, perDay: 90 }\n  enterprise: { custom: true }\nanonymous: { perMinute: 3, perDay: 9 }\n',
    'routes.yaml': 'routes:\n  - { method: POST, path: /v1/pets, cost: 5 }\n'
  })) as Doc
  t.match(metered.info.description, [
    '| plan | per minute | per day | per month |', '|---|---|---|---|', '| free | 7 | 70 | 700 |', '| pro | 8 | 80 | 800 (overage allowed) |',
    '| business | 9 | 90 | — |', '| enterprise | per key | per key | per key |', '| without a valid key (per client IP) | 3 | 9 | — |'
  ].join('\n'))
  t.match(metered.info.description, /1 unless the operation says otherwise; `POST \/v1\/pets` costs 5\)/)
  const createPet = operation(metered, 'createPet')
  t.equal(createPet['x-rate-limit-cost'], 5)
  t.match(createPet.description, /\*\*Cost: 5 units\*\* of every window \(minute, day, month\)/)
  t.equal(operation(metered, 'listPets')['x-rate-limit-cost'], undefined)
})

t.test('docs/openapi.json and src/client/openapi-types.ts are what `npm run openapi` writes now', async (t) => {
  // `npm run openapi` documents the shipped config/, so this compares against that, not the fixture.
  const current = buildOpenApiDocument(loadConfigDir(SHIPPED_CONFIG_DIR)) as JsonObject
  t.equal(DEFAULT_DOCUMENT_PATH, join(SHIPPED_CONFIG_DIR, '..', 'docs', 'openapi.json'))
  t.equal(readFileSync(DEFAULT_DOCUMENT_PATH, 'utf8'), documentText(current), 'docs/openapi.json is stale: run npm run openapi')
  t.equal(readFileSync(DEFAULT_TYPES_PATH, 'utf8'), await clientTypesText(current), 'src/client/openapi-types.ts is stale: run npm run openapi')
})

t.test('`npm run openapi` for another config directory writes that config\'s document and types where it is told; an invalid one writes nothing', async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'openapi-'))
  t.teardown(() => { rmSync(out, { recursive: true, force: true }) })
  // A config of its own: the orders route marked beta, which the shipped one does not say.
  const configDir = join(out, 'config')
  cpSync(FIXTURE_CONFIG_DIR, configDir, { recursive: true })
  const routes = join(configDir, 'routes.yaml')
  writeFileSync(routes, readFileSync(routes, 'utf8').replace('stability: experimental', 'stability: beta'))
  const targets = { configDir, documentPath: join(out, 'docs', 'openapi.json'), typesPath: join(out, 'openapi-types.ts') }
  const line = await writeOpenApi(targets)
  t.equal(line, `wrote ${targets.documentPath} and ${targets.typesPath} (config: ${configDir})`, 'the line it prints names both files and the config')
  const expected = buildOpenApiDocument(loadConfigDir(configDir)) as JsonObject
  const written = readFileSync(targets.documentPath, 'utf8')
  t.equal(written, documentText(expected), 'the document of the directory given (its docs/ folder made)')
  t.match(written, '**Stability: beta.**', 'with that config\'s mark')
  t.notMatch(readFileSync(DEFAULT_DOCUMENT_PATH, 'utf8'), '**Stability: beta.**', 'which the shipped document does not have')
  t.equal(readFileSync(targets.typesPath, 'utf8'), await clientTypesText(expected), 'and its client types')

  const missing = join(out, 'no-such-config')
  const refused = { configDir: missing, documentPath: join(out, 'refused', 'openapi.json'), typesPath: join(out, 'refused-types.ts') }
  await t.rejects(writeOpenApi(refused), { name: 'ConfigError', message: new RegExp(`plans\\.yaml: cannot read ${missing}/plans\\.yaml: ENOENT`) })
  t.notOk(existsSync(refused.documentPath) || existsSync(refused.typesPath), 'nothing written for a config that does not load')
})

t.test('servers: this gateway, then production and staging when PUBLIC_BASE_URL / STAGING_BASE_URL are set', async (t) => {
  t.same(buildOpenApiDocument(testConfig()).servers, [{ url: '/v1', description: 'This gateway' }], 'neither set: the relative server only')
  const both = buildOpenApiDocument(testConfig(), { publicBaseUrl: 'https://api.petstore.example/', stagingBaseUrl: 'https://api.staging.petstore.example' })
  t.same(both.servers, [
    { url: '/v1', description: 'This gateway' },
    { url: 'https://api.petstore.example/v1', description: 'Production' },
    { url: 'https://api.staging.petstore.example/v1', description: 'Staging' }
  ])
  t.same(buildOpenApiDocument(testConfig(), { stagingBaseUrl: 'https://staging.example' }).servers,
    [{ url: '/v1', description: 'This gateway' }, { url: 'https://staging.example/v1', description: 'Staging' }])
})
