// The ledger of fallback admissions on its own: an admission whose script is still queued in Redis
// awaits its late reply (counted there: nothing to write back; refused or lost: written back);
// pending admissions go back in one batch per consumer with a sequence number, resent unchanged
// until answered; what a later reply covers is dropped; a data loss makes everything uncovered
// pending again; what left every window is dropped, and old minute buckets fold.
import t from 'tap'
import { createLedger, type WriteBackEntry } from '../../../../src/gateway/limiter/stores/write-back.js'
import type { ConsumeResult } from '../../../../src/gateway/limiter/store.js'
import { until } from '../../../helpers/poll.js'

function answer (outcome: ConsumeResult['outcome'], now: number): ConsumeResult {
  return { outcome, now, minute: { count: 1, resetAt: 0, retryAt: 0 }, day: { count: 1, resetAt: 0, retryAt: 0 }, bannedUntil: 0 }
}

function setup (): { sent: Array<{ id: string, seq: number, entries: WriteBackEntry[] }>, redis: { up: boolean, at: number }, ledger: ReturnType<typeof createLedger> } {
  const sent: Array<{ id: string, seq: number, entries: WriteBackEntry[] }> = []
  const redis = { up: true, at: 5_000 }
  const ledger = createLedger({
    send: async (id, seq, entries) => {
      sent.push({ id, seq, entries })
      if (!redis.up) throw new Error('no answer')
      return redis.at
    },
    canSend: () => redis.up
  })
  return { sent, redis, ledger }
}

t.test('an admission whose script ran late: counted by Redis when it admitted it, written back when it did not', async (t) => {
  const { sent, ledger } = setup()
  let admit: (r: ConsumeResult) => void = () => {}
  let refuse: (r: ConsumeResult) => void = () => {}
  ledger.record('a', 10, 1, new Promise((resolve) => { admit = resolve }))
  ledger.record('b', 10, 1, new Promise((resolve) => { refuse = resolve }))
  t.equal(ledger.unresolved('a'), true, 'unresolved until its reply')
  admit(answer('ok', 4_000))
  refuse(answer('rate_limited', 4_000))
  await until('b written back', () => sent.length === 1, 1_000, 2)
  t.same(sent, [{ id: 'b', seq: 1, entries: [{ minute: 10, day: 1, count: 1 }] }], 'only the one Redis refused goes back')
  await until('b applied', () => !ledger.unresolved('b'), 1_000, 2)
  t.equal(ledger.unresolved('a'), false)
  t.same(ledger.own('a', 0, 0), { minute: 1, day: 1, oldestMinute: 10, oldestDay: 1 }, 'still counted by the fallback until a reply covers it')
  ledger.covered('a', 4_000)
  t.equal(ledger.own('a', 0, 0).minute, 1, 'a reply at the same Redis ms may have run before it')
  ledger.covered('a', 4_001)
  t.equal(ledger.own('a', 0, 0).minute, 0, 'a later reply counts it: dropped')
  t.equal(ledger.size, 1)

  let lose: (err: Error) => void = () => {}
  ledger.record('c', 11, 1, new Promise((_resolve, reject) => { lose = reject }))
  lose(new Error('connection closed'))
  await until('c written back', () => sent.some((s) => s.id === 'c'), 1_000, 2)
})

t.test('one batch per consumer with a sequence number, resent unchanged until answered', async (t) => {
  const { sent, redis, ledger } = setup()
  redis.up = false
  ledger.record('a', 10, 1)
  ledger.record('a', 10, 1)
  ledger.record('a', 11, 1)
  t.equal(sent.length, 0, 'nothing sent while the shard does not answer')
  await ledger.flush('a')
  t.same(sent[0], { id: 'a', seq: 1, entries: [{ minute: 10, day: 1, count: 2 }, { minute: 11, day: 1, count: 1 }] })
  ledger.record('a', 12, 1)
  await ledger.flush('a')
  t.same(sent[1], sent[0], 'a retry: the same batch, the same number (Redis may have applied it)')
  redis.up = true
  await ledger.flush('a')
  t.same(sent[2], sent[0])
  t.equal(ledger.unresolved('a'), true, 'the admission made meanwhile is still to go')
  await ledger.flushAll()
  t.same(sent[3], { id: 'a', seq: 2, entries: [{ minute: 12, day: 1, count: 1 }] }, 'in a batch of its own, the next number')
  t.equal(ledger.unresolved('a'), false)
  t.equal(ledger.own('a', 0, 0).minute, 4)
})

t.test('a data loss: everything not covered goes back again; a batch in flight is dropped', async (t) => {
  const { sent, ledger } = setup()
  ledger.record('a', 10, 1)
  await ledger.flush('a')
  ledger.record('b', 10, 1)
  ledger.lost((id) => id === 'a')
  t.equal(ledger.unresolved('a'), true)
  await ledger.flush('a')
  const again = sent.at(-1)
  t.same(again?.entries, [{ minute: 10, day: 1, count: 1 }], 'applied before the loss, sent again')
  t.ok(again !== undefined && again.seq > 1, 'under a new sequence number')
})

t.test('prune: what left every window goes, old minute buckets fold by day bucket', async (t) => {
  const { redis, ledger } = setup()
  redis.up = false
  ledger.record('a', 100, 5)
  ledger.record('a', 101, 5)
  ledger.record('a', 200, 6)
  ledger.record('z', 50, 1)
  ledger.prune((id) => id === 'a' ? { minute: 150, day: 5 } : { minute: 150, day: 2 })
  t.same(ledger.own('a', 0, 0), { minute: 1, day: 3, oldestMinute: 200, oldestDay: 5 }, 'the two of day 5 folded, out of the minute window')
  t.same(ledger.own('a', -1, 0).minute, 3, 'folded into one line without a minute bucket')
  t.equal(ledger.unresolved('z'), false, 'out of every window: dropped')
  t.equal(ledger.size, 1)
  ledger.forget('a')
  t.equal(ledger.size, 0)
})
