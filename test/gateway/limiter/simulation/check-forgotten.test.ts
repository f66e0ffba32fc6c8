// The simulator's checker on the one double fault it checks by its stated bound rather than exactly: a process
// crashes (its ledger gone) and Redis then loses its data, so no re-seed carries what that process admitted
// (docs/limiter-internals.md, "What is outside the bound"). Those admissions (`forgottenAt`) are left out of the
// windows that end at or after the loss, and only there: every other admission is still held to the exact limit,
// and a window that ends before the loss counts them all. The numbers are those of data-loss seed 1058.
import t from 'tap'
import { violations } from '../../../helpers/sim/check.js'
import type { Admission } from '../../../helpers/sim/process.js'

const LIMIT = 51
const LOSS_AT = 35_390
const limits = new Map([['c3', { perMinute: LIMIT, perDay: LIMIT * 50, perMonth: 0 }]])

function admissions (count: number, from: number, forgottenAt?: number): Admission[] {
  return Array.from({ length: count }, (_, i) => ({ consumer: 'c3', t: from + i, redisT: from + i, reachedRedisAt: from + i, cost: 1, via: 'redis' as const, process: 'p0', ...(forgottenAt === undefined ? {} : { forgottenAt }) }))
}

// The crashed process's 33 units (1.5-6.5 s), the survivor's 18 (re-seeded at the loss), 7 more after it.
const crashed = admissions(33, 1_500, LOSS_AT)
const survivor = admissions(18, 2_000)
const after = admissions(7, 37_970)

t.test('seed 1058: 58 units by truth, 25 of them counted again after the loss: within the stated bound', async (t) => {
  const found = violations([...crashed, ...survivor, ...after], limits)
  t.same(found, [], 'the 33 forgotten units are left out of the window ending at 38 s')
  const unmarked = violations([...crashed.map(({ forgottenAt: _, ...a }) => a), ...survivor, ...after], limits)
  t.equal(unmarked[0]?.units, 58, `checked exactly (the checker before), the same schedule reads 58 of ${LIMIT}: ${JSON.stringify(unmarked)}`)
})

t.test('what Redis counted again is still held to the exact limit after the loss', async (t) => {
  // 18 re-seeded + 34 after the loss = 52 of 51, beside the forgotten 33.
  const found = violations([...crashed, ...survivor, ...admissions(34, 37_970)], limits)
  t.equal(found.length, 1, 'one window over')
  t.equal(found[0]?.units, 52, 'the remembered units alone: 18 + 34')
})

t.test('a window that ends before the loss counts the forgotten admissions too', async (t) => {
  // 33 (forgotten later) + 19 before the loss = 52 of 51: over while the process was still remembered.
  const found = violations([...crashed, ...admissions(19, 20_000)], limits)
  t.equal(found.length, 1, 'one window over')
  t.equal(found[0]?.units, 52, 'all 52 units, the window ending before the loss')
})

t.test('a month: forgotten units leave it only from the loss on', async (t) => {
  const monthly = new Map([['c3', { perMinute: 1_000, perDay: 10_000, perMonth: LIMIT }]])
  t.same(violations([...crashed, ...survivor, ...after], monthly), [], '25 of 51 counted in the month after the loss')
  const before = violations([...crashed, ...admissions(19, 20_000)], monthly)
  t.equal(before[0]?.units, 52, 'the month at 52 before the loss')
})
