// The `local` fallback's decision on injected clocks (docs/limiter-internals.md, "Through faults"):
// the count last heard taken to stay until everything it counted could have left, this process's
// own fallback admissions added exactly, its share of the room only (one share kept back while a
// count from before the outage is in force); a consumer not heard of
// lately taken as full but for the allowance during the outage's first minute; Redis time
// bounded from the last reply (admissions counted in the latest bucket they can be in); bans
// heard of, bans decided here; anonymous clients.
import t from 'tap'
import { createKnowledge } from '../../../../src/gateway/limiter/stores/knowledge.js'
import { createLocalFallback } from '../../../../src/gateway/limiter/stores/local-fallback.js'
import { createMemoryStore } from '../../../../src/gateway/limiter/stores/memory.js'
import { createLedger } from '../../../../src/gateway/limiter/stores/write-back.js'
import type { ConsumeResult } from '../../../../src/gateway/limiter/store.js'

const T0 = Date.UTC(2030, 0, 1, 12, 0, 0) // a minute and day bucket boundary
const LIMITS = { perMinute: 600, perDay: 10_000 }
const BAN = { threshold: 3, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86_400 }

function reply (now: number, minute: number, day = minute, bannedUntil = 0): ConsumeResult {
  return { outcome: bannedUntil > 0 ? 'key_banned' : 'ok', now, minute: { count: minute, resetAt: 0, retryAt: 0 }, day: { count: day, resetAt: 0, retryAt: 0 }, bannedUntil }
}

function setup (processes = 2): {
  clock: { now: number }
  knowledge: ReturnType<typeof createKnowledge>
  ledger: ReturnType<typeof createLedger>
  fallback: ReturnType<typeof createLocalFallback>
  failed: { since: number | undefined }
} {
  const clock = { now: T0 }
  const failed: { since: number | undefined } = { since: undefined }
  const knowledge = createKnowledge({ shardOf: () => '', now: () => clock.now })
  const ledger = createLedger({ send: async () => clock.now, canSend: () => false })
  const store = createMemoryStore({ now: () => clock.now })
  const fallback = createLocalFallback({ knowledge, ledger, processes: () => processes, shardOf: () => '', failedSince: () => failed.since, store: () => store, now: () => clock.now })
  return { clock, knowledge, ledger, fallback, failed }
}

async function admitted (fallback: ReturnType<typeof createLocalFallback>, id: string, n: number, ban: typeof BAN | null = null): Promise<number> {
  let ok = 0
  for (let i = 0; i < n; i++) if ((await fallback.consume(id, LIMITS, ban)).outcome === 'ok') ok++
  return ok
}

t.test('from the count last heard: this process admits its share of the room, headers say what it has left', async (t) => {
  const { clock, knowledge, fallback, failed } = setup()
  clock.now = T0 + 400
  knowledge.learn('c', reply(T0 + 400, 500), T0 + 399)
  clock.now = T0 + 450
  failed.since = clock.now
  const first = await fallback.consume('c', LIMITS, null)
  t.equal(first.outcome, 'ok')
  t.equal(LIMITS.perMinute - first.minute.count, 32, 'remaining: (600 - 500) / (2 processes + 1 share kept back), one taken')
  t.equal(first.minute.resetAt, (Math.floor((T0 + 400) / 1000) + 61) * 1000, 'the known count leaves 61 s after its bucket began')
  t.equal(await admitted(fallback, 'c', 100), 32, 'then 32 more, not one beyond the share')
  const refused = await fallback.consume('c', LIMITS, null)
  t.equal(refused.outcome, 'rate_limited')
  t.equal(refused.minute.retryAt, (Math.floor((T0 + 400) / 1000) + 61) * 1000, 'retry when the known count leaves')
})

t.test('a full window known: nothing admitted until what it counted could have left, then a share of the limit', async (t) => {
  const { clock, knowledge, fallback, failed, ledger } = setup()
  clock.now = T0 + 200
  knowledge.learn('c', reply(T0 + 200, 600), T0 + 199)
  clock.now = T0 + 300
  failed.since = clock.now
  t.equal(await admitted(fallback, 'c', 50), 0)
  clock.now = T0 + 60_999
  t.equal(await admitted(fallback, 'c', 5), 0, 'still inside 61 s of the reply\'s bucket')
  clock.now = T0 + 61_000
  t.equal(await admitted(fallback, 'c', 400), 300, 'then 600 / 2 processes: nothing from before the outage is left to keep a share back for')
  t.same(ledger.own('c', Math.floor(clock.now / 1000) - 60, 0), { minute: 300, day: 300, oldestMinute: Math.floor((T0 + 61_000) / 1000), oldestDay: Math.floor(T0 / 900_000) }, 'each counted in the ledger, in its bucket')
  clock.now = T0 + 121_000
  t.equal(await admitted(fallback, 'c', 400), 0, 'its own admissions stay for the 61 buckets the window counts')
  clock.now = T0 + 122_000
  t.equal(await admitted(fallback, 'c', 400), 300, 'then they left too')
})

t.test('the day window binds too, from its own count', async (t) => {
  const { knowledge, fallback, clock, failed } = setup()
  knowledge.learn('c', reply(T0, 10, 9_990), T0)
  failed.since = clock.now
  t.equal(await admitted(fallback, 'c', 20), 3, '(10,000 - 9,990) / (2 + 1)')
  const refused = await fallback.consume('c', LIMITS, null)
  t.ok(refused.day.retryAt > 0 && refused.minute.retryAt === 0, 'rejected by the day window')
})

t.test('a consumer not heard of lately, or never: full but for the allowance during the outage\'s first minute', async (t) => {
  const { clock, knowledge, fallback, failed } = setup()
  knowledge.learn('old', reply(T0, 10), T0)
  clock.now = T0 + 5_000
  knowledge.learn('other', reply(T0 + 5_000, 1), T0 + 5_000) // the shard answered later: 'old' is 5 s stale
  failed.since = T0 + 5_100
  clock.now = T0 + 5_200
  t.equal(await admitted(fallback, 'old', 20), 2, '1 % of 600, split over 2 processes + 1')
  t.equal(await admitted(fallback, 'never', 20), 2, 'the same for a consumer never heard of')
  clock.now = T0 + 5_100 + 61_000
  t.equal(await admitted(fallback, 'never', 400), 300, 'once what was counted before the outage left: a share of the limit')
})

t.test('Redis time from the last reply: admissions go into the latest bucket Redis can be in', async (t) => {
  const { clock, knowledge, fallback, ledger, failed } = setup()
  // Redis's clock runs 30 s ahead of this gateway's; the reply took 200 ms.
  clock.now = T0 + 900
  knowledge.learn('c', reply(T0 + 30_800, 0), T0 + 700)
  failed.since = clock.now
  clock.now = T0 + 1_000
  await fallback.consume('c', LIMITS, null)
  const latest = Math.floor((T0 + 1_000 + 30_100) / 1000)
  t.same(ledger.own('c', latest, 0).minute, 1, 'counted in the bucket of send time + elapsed (the upper bound)')
  t.same(ledger.own('c', latest + 1, 0).minute, 0, 'not later')
})

t.test('bans: one heard from Redis answers key_banned; 429s counted here ban under the policy, in Redis time', async (t) => {
  const { clock, knowledge, fallback, failed } = setup()
  knowledge.learn('banned', reply(T0, 0, 0, T0 + 60_000), T0)
  failed.since = clock.now
  const heard = await fallback.consume('banned', LIMITS, BAN)
  t.equal(heard.outcome, 'key_banned')
  t.equal(heard.bannedUntil, T0 + 60_000)
  knowledge.learn('full', reply(T0 + 5_000, 600), T0 + 5_000 - 50) // Redis 5 s ahead of the gateway
  const outcomes = []
  for (let i = 0; i < 4; i++) outcomes.push((await fallback.consume('full', LIMITS, BAN)))
  t.same(outcomes.map((r) => r.outcome), ['rate_limited', 'rate_limited', 'rate_limited', 'ban_started'])
  const started = outcomes[3]!
  t.equal(started.bannedUntil - started.now, 900_000, 'the ban lasts its duration from the answer\'s now')
  t.equal((await fallback.consume('full', LIMITS, BAN)).outcome, 'key_banned')
  t.same(fallback.drain(), ['full'], 'the consumers it decided for, to forget once Redis is back')
  t.same(fallback.drain(), [])
})

t.test('knowledge: a ban answer that did not read the windows is no count; a late reply changes only what it is newer for', async (t) => {
  const { knowledge } = setup()
  knowledge.learn('c', reply(T0, 599), T0)
  knowledge.learn('c', reply(T0 + 10, 0, 0, T0 + 1_000), T0)
  t.match(knowledge.get('c'), { minute: 599, at: T0, bannedUntil: T0 + 1_000 })
  knowledge.learn('c', reply(T0 + 5, 1), T0)
  t.match(knowledge.get('c'), { minute: 1, at: T0 + 5, bannedUntil: T0 + 1_000 }, 'newer counts, the newer ban kept')
  knowledge.learn('c', reply(T0 - 5, 3), T0)
  t.equal(knowledge.get('c')?.minute, 1, 'older than both: nothing changes')
})

t.test('anonymous clients: this process\'s share of their limit, from an empty window; never learned', async (t) => {
  const { knowledge, fallback, failed, clock } = setup()
  knowledge.learn('ip:192.0.2.1', reply(T0, 29), T0)
  t.equal(knowledge.get('ip:192.0.2.1'), undefined, 'an address flood cannot evict the consumers\' counts')
  failed.since = clock.now
  const limits = { perMinute: 30, perDay: 300 }
  const results = []
  for (let i = 0; i < 16; i++) results.push(await fallback.consume('ip:192.0.2.1', limits, null))
  t.equal(results.filter((r) => r.outcome === 'ok').length, 15)
  t.equal(limits.perMinute - results[0]!.minute.count, 14, 'remaining counts against the share')
})

t.test('peek decides the same and records nothing', async (t) => {
  const { knowledge, fallback, ledger, failed, clock } = setup()
  knowledge.learn('c', reply(T0, 597), T0)
  failed.since = clock.now
  t.equal((await fallback.peek('c', LIMITS)).outcome, 'ok')
  t.equal(ledger.size, 0)
  t.equal((await fallback.consume('c', LIMITS, null)).outcome, 'ok')
  t.equal((await fallback.peek('c', LIMITS)).outcome, 'rate_limited', '(600 - 597) / 3 = 1, taken')
})
