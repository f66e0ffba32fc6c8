import t from 'tap'
import { onFirstUse } from '../../src/shared/on-first-use.js'

t.test('nothing is made until the first call; then once, and every call returns the same value', async (t) => {
  let made = 0
  const value = onFirstUse(() => ({ made: ++made }))
  t.equal(made, 0, 'not at creation')
  const first = value()
  t.equal(made, 1)
  t.equal(value(), first, 'the same object')
  t.equal(made, 1, 'made once')
})

t.test('a value that is undefined is made once too', async (t) => {
  let calls = 0
  const value = onFirstUse(() => { calls++ })
  value()
  value()
  t.equal(calls, 1)
})
