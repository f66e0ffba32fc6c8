// RateLimit-Policy's cached field: one per limits object, and a month quota's field follows the
// calendar month of each request's `now` (the cache holds a field only for the month it was built in).
import t from 'tap'
import { policyField } from '../../../src/gateway/limiter/headers.js'
import type { Limits } from '../../../src/gateway/config/types.js'

const FEB_2030 = Date.UTC(2030, 1, 15)
const MAR_2030_START = Date.UTC(2030, 2, 1)

t.test('a month quota: the window is the length of the month holding now, across a boundary and back', async (t) => {
  const limits: Limits = Object.freeze({ perMinute: 10, perDay: 100, perMonth: 1000 })
  t.equal(policyField(limits, FEB_2030), '"minute";q=10;w=60, "day";q=100;w=86400, "month";q=1000;w=2419200')
  t.equal(policyField(limits, MAR_2030_START - 1), '"minute";q=10;w=60, "day";q=100;w=86400, "month";q=1000;w=2419200', 'last ms of February')
  t.equal(policyField(limits, MAR_2030_START), '"minute";q=10;w=60, "day";q=100;w=86400, "month";q=1000;w=2678400', 'first ms of March: 31 days')
  t.equal(policyField(limits, FEB_2030), '"minute";q=10;w=60, "day";q=100;w=86400, "month";q=1000;w=2419200', 'a clock stepped back reads its own month')
})

t.test('no month quota: one field for every instant, the same string object each time', async (t) => {
  const limits: Limits = Object.freeze({ perMinute: 5, perDay: 50 })
  const first = policyField(limits, 0)
  t.equal(first, '"minute";q=5;w=60, "day";q=50;w=86400')
  t.equal(policyField(limits, FEB_2030), first)
  t.equal(policyField(limits, MAR_2030_START), first)
})
