import t from 'tap'
import { ApiError, toApiError } from '../../src/interface/errors.js'

t.test('ApiError keeps its status, code and message', async (t) => {
  const e = toApiError(new ApiError('not_found', 'Pet 3 not found'))
  t.same(e.body, { code: 'not_found', message: 'Pet 3 not found', status: 404 })
})

t.test('unknown errors become a bare 500 without internals', async (t) => {
  const e = toApiError(new Error('secret stack detail'))
  t.same(e.body, { code: 'internal_error', message: 'The server could not complete the request', status: 500 })
})
