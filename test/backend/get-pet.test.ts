import t from 'tap'
import { assertError, postJson, request, startBackend } from '../helpers/backend.js'

t.test('GET /v1/pets/:petId returns the Pet', async (t) => {
  const backend = await startBackend(t)
  await request(`${backend.url}/v1/pets`, postJson({ name: 'Rex', categoryId: 4, status: 'sold' }))
  const res = await request(`${backend.url}/v1/pets/1`)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
  t.strictSame(res.body, { id: 1, name: 'Rex', categoryId: 4, status: 'sold' })
})

t.test('an unknown id is 404 not_found naming the id', async (t) => {
  const backend = await startBackend(t)
  assertError(t, await request(`${backend.url}/v1/pets/42`), 404, 'not_found', 'Pet 42 not found')
  assertError(t, await request(`${backend.url}/v1/pets/9007199254740991`), 404, 'not_found', 'Pet 9007199254740991 not found')
})

t.test('a non-integer or out-of-range id is 400 invalid_parameter', async (t) => {
  const backend = await startBackend(t)
  const cases: Array<[string, string]> = [
    ['abc', 'params/petId must be integer'],
    ['1.5', 'params/petId must be integer'],
    ['1e400', 'params/petId must be a finite integer'],
    ['Infinity', 'params/petId must be a finite integer'],
    ['-1e400', 'params/petId must be a finite integer'],
    ['0', 'params/petId must be >= 1'],
    ['-3', 'params/petId must be >= 1'],
    ['9007199254740992', 'params/petId must be <= 9007199254740991'],
    ['99999999999999999999', 'params/petId must be <= 9007199254740991']
  ]
  for (const [id, message] of cases) {
    assertError(t, await request(`${backend.url}/v1/pets/${id}`), 400, 'invalid_parameter', message)
  }
})
