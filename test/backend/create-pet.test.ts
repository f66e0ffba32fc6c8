import t from 'tap'
import { assertError, postJson, request, startBackend } from '../helpers/backend.js'

const NAME_RULE = 'body/name must be 1-200 characters after trimming, without control characters'

t.test('POST /v1/pets answers 201 with the Pet and its Location', async (t) => {
  const backend = await startBackend(t)
  const res = await request(`${backend.url}/v1/pets`, postJson({ name: 'Rex', categoryId: 3, status: 'pending' }))
  t.equal(res.status, 201)
  t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
  t.equal(res.headers.get('location'), '/v1/pets/1')
  t.strictSame(res.body, { id: 1, name: 'Rex', categoryId: 3, status: 'pending' })

  const again = await request(`${backend.url}/v1/pets/1`)
  t.equal(again.status, 200)
  t.strictSame(again.body, { id: 1, name: 'Rex', categoryId: 3, status: 'pending' })
})

const CREATED_AS: Array<[test: string, pet: Record<string, unknown>, created: Record<string, unknown>]> = [
  ['status defaults to available', { name: 'Tom', categoryId: 1 }, { id: 1, name: 'Tom', categoryId: 1, status: 'available' }],
  ['categoryId accepts the largest safe integer', { name: 'Big', categoryId: 9007199254740991 }, { id: 1, name: 'Big', categoryId: 9007199254740991, status: 'available' }]
]
for (const [test, pet, created] of CREATED_AS) {
  t.test(test, async (t) => {
    const backend = await startBackend(t)
    const res = await request(`${backend.url}/v1/pets`, postJson(pet))
    t.equal(res.status, 201)
    t.strictSame(res.body, created)
  })
}

t.test('the name is stored trimmed', async (t) => {
  const backend = await startBackend(t)
  const res = await request(`${backend.url}/v1/pets`, postJson({ name: ' \u00a0 Felix the cat  ', categoryId: 2 }))
  t.equal(res.status, 201)
  t.strictSame(res.body, { id: 1, name: 'Felix the cat', categoryId: 2, status: 'available' })
  const stored = await request(`${backend.url}/v1/pets/1`)
  t.strictSame(stored.body, { id: 1, name: 'Felix the cat', categoryId: 2, status: 'available' })
})

t.test('ids are positive and increasing', async (t) => {
  const backend = await startBackend(t)
  let previous = 0
  for (let i = 0; i < 5; i++) {
    const res = await request(`${backend.url}/v1/pets`, postJson({ name: `pet ${i}`, categoryId: 1 }))
    const pet = res.body as { id: number }
    t.ok(pet.id > previous, `id ${pet.id} > ${previous}`)
    t.equal(res.headers.get('location'), `/v1/pets/${pet.id}`)
    previous = pet.id
  }
})

t.test('name boundaries: 1 and 200 characters after trim are accepted, 201 and blank are not', async (t) => {
  const backend = await startBackend(t)
  const url = `${backend.url}/v1/pets`
  const one = await request(url, postJson({ name: 'a', categoryId: 1 }))
  t.equal(one.status, 201)
  const max = 'é'.repeat(199) + '🐈'
  const longest = await request(url, postJson({ name: `  ${max}  `, categoryId: 1 }))
  t.equal(longest.status, 201)
  t.equal((longest.body as { name: string }).name, max)
  const inner = await request(url, postJson({ name: `a${' '.repeat(198)}b`, categoryId: 1 }))
  t.equal(inner.status, 201)

  assertError(t, await request(url, postJson({ name: 'x'.repeat(201), categoryId: 1 })), 400, 'invalid_body', NAME_RULE)
  assertError(t, await request(url, postJson({ name: '', categoryId: 1 })), 400, 'invalid_body',
    'body/name must NOT have fewer than 1 characters')
  assertError(t, await request(url, postJson({ name: '   ', categoryId: 1 })), 400, 'invalid_body', NAME_RULE)
})

t.test('control characters in the name are rejected, even where trimming would remove them', async (t) => {
  const backend = await startBackend(t)
  for (const name of ['a\u0000b', 'tab\there', 'bell\u0007', 'del\u007f', 'c1\u0085', '\tleading', 'trailing\n']) {
    const res = await request(`${backend.url}/v1/pets`, postJson({ name, categoryId: 1 }))
    assertError(t, res, 400, 'invalid_body', NAME_RULE)
  }
  const list = await request(`${backend.url}/v1/pets`)
  t.strictSame(list.body, [])
})

t.test('missing and invalid fields are 400 invalid_body', async (t) => {
  const backend = await startBackend(t)
  const url = `${backend.url}/v1/pets`
  const cases: Array<[unknown, string]> = [
    [{ categoryId: 1 }, "body must have required property 'name'"],
    [{ name: 'Rex' }, "body must have required property 'categoryId'"],
    [{ name: 'Rex', categoryId: 0 }, 'body/categoryId must be >= 1'],
    [{ name: 'Rex', categoryId: 9007199254740992 }, 'body/categoryId must be <= 9007199254740991'],
    [{ name: 'Rex', categoryId: 1.5 }, 'body/categoryId must be integer'],
    [{ name: 'Rex', categoryId: '7' }, 'body/categoryId must be integer'],
    [{ name: 'Rex', categoryId: true }, 'body/categoryId must be integer'],
    [{ name: 'Rex', categoryId: null }, 'body/categoryId must be integer'],
    [{ name: 12, categoryId: 1 }, 'body/name must be string'],
    [{ name: null, categoryId: 1 }, 'body/name must be string'],
    [{ name: 'Rex', categoryId: 1, status: 'lost' }, 'body/status must be equal to one of the allowed values'],
    [{ name: 'Rex', categoryId: 1, status: 1 }, 'body/status must be string'],
    [[{ name: 'Rex', categoryId: 1 }], 'body must be object'],
    ['{"name":"Rex","categoryId":1e400}', 'body/categoryId must be integer'],
    ['"Rex"', 'body must be object'],
    ['null', 'body must be object']
  ]
  for (const [body, message] of cases) {
    assertError(t, await request(url, postJson(body)), 400, 'invalid_body', message)
  }
  assertError(t, await request(url, { method: 'POST' }), 400, 'invalid_body', 'body must be object')
  t.strictSame((await request(url)).body, [])
})

t.test('unknown fields are rejected, not stripped', async (t) => {
  const backend = await startBackend(t)
  const res = await request(`${backend.url}/v1/pets`, postJson({ name: 'Rex', categoryId: 1, id: 99 }))
  assertError(t, res, 400, 'invalid_body', 'body must NOT have additional properties')
  t.strictSame((await request(`${backend.url}/v1/pets`)).body, [])
})

t.test('prototype-pollution keys are rejected and never stored', async (t) => {
  const backend = await startBackend(t)
  const url = `${backend.url}/v1/pets`
  const notJson = 'Request body is not valid JSON'
  assertError(t, await request(url, postJson('{"name":"Rex","categoryId":1,"__proto__":{"polluted":true}}')),
    400, 'invalid_body', notJson)
  assertError(t, await request(url, postJson('{"name":"Rex","categoryId":1,"constructor":{"prototype":{"polluted":true}}}')),
    400, 'invalid_body', notJson)
  assertError(t, await request(url, postJson('{"name":"Rex","categoryId":1,"constructor":"x"}')),
    400, 'invalid_body', 'body must NOT have additional properties')
  assertError(t, await request(url, postJson('{"name":"Rex","categoryId":1,"prototype":{}}')),
    400, 'invalid_body', 'body must NOT have additional properties')
  t.equal(({} as Record<string, unknown>).polluted, undefined)
  t.strictSame((await request(url)).body, [])
})

t.test('malformed or empty JSON is 400 invalid_body', async (t) => {
  const backend = await startBackend(t)
  const url = `${backend.url}/v1/pets`
  // One sentence each: Fastify's own wording ("Body is not valid JSON but content-type is set to
  // 'application/json'") used to follow ours and say it twice.
  assertError(t, await request(url, postJson('{"name":')), 400, 'invalid_body', 'Request body is not valid JSON')
  assertError(t, await request(url, postJson('')), 400, 'invalid_body', 'Request body is empty but content-type is application/json')
})

t.test('a body that is not application/json is 415 unsupported_media_type', async (t) => {
  const backend = await startBackend(t)
  const url = `${backend.url}/v1/pets`
  const message = 'Request body must be application/json'
  assertError(t, await request(url, postJson('{"name":"Rex","categoryId":1}', 'text/plain')), 415, 'unsupported_media_type', message)
  assertError(t, await request(url, postJson('name=Rex&categoryId=1', 'application/x-www-form-urlencoded')), 415, 'unsupported_media_type', message)
  assertError(t, await request(url, { method: 'POST', body: 'Rex' }), 415, 'unsupported_media_type', message)
  t.strictSame((await request(url)).body, [])
})

t.test('application/json with a charset parameter is accepted', async (t) => {
  const backend = await startBackend(t)
  const res = await request(`${backend.url}/v1/pets`, postJson({ name: 'Rex', categoryId: 1 }, 'application/json; charset=utf-8'))
  t.equal(res.status, 201)
})

t.test('a body over 16 KiB is 413 payload_too_large; one of exactly 16 KiB is read', async (t) => {
  const backend = await startBackend(t)
  const url = `${backend.url}/v1/pets`
  const over = JSON.stringify({ name: 'x'.repeat(16 * 1024), categoryId: 1 })
  assertError(t, await request(url, postJson(over)), 413, 'payload_too_large', 'Request body is over the limit of 16384 bytes')
  const under = `{"name":"Rex","categoryId":1}${' '.repeat(16 * 1024 - 29)}`
  t.equal(Buffer.byteLength(under), 16 * 1024)
  t.equal((await request(url, postJson(under))).status, 201)
})

t.test('the body limit is configurable', async (t) => {
  const backend = await startBackend(t, { bodyLimit: 64 })
  const res = await request(`${backend.url}/v1/pets`, postJson({ name: 'x'.repeat(64), categoryId: 1 }))
  assertError(t, res, 413, 'payload_too_large', 'Request body is over the limit of 64 bytes')
})
