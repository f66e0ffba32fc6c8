// The in-process store keeps keys and anonymous clients in separate bounded tables: no number of
// anonymous clients evicts a key's windows, its ban or its ban escalation, and the anonymous table
// stays within its own bound by evicting only anonymous clients.
import { askOf } from '../../../src/gateway/limiter/store.js'
import t from 'tap'
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'

const LIMITS = { perMinute: 2, perDay: 100 }
const BAN = { threshold: 1, windowSeconds: 60, durationSeconds: 10, maxDurationSeconds: 1000 }

t.test('anonymous clients never evict a key, its ban or its escalation', async (t) => {
  let now = 1_700_000_000_000
  const store = createMemoryStore({ now: () => now, maxKeys: 10, maxAnonymousStates: 5 })
  const outcomes: string[] = []
  for (let i = 0; i < 5; i++) outcomes.push((await store.consume('acme', askOf(LIMITS, BAN))).outcome)
  t.strictSame(outcomes, ['ok', 'ok', 'rate_limited', 'ban_started', 'key_banned'])
  const firstBan = (await store.admin.listBans())[0]
  t.equal(firstBan?.until, now + 10_000, 'first ban: durationSeconds')

  for (let i = 0; i < 1000; i++) await store.consume(`ip:198.51.${i >> 8}.${i & 0xff}`, askOf(LIMITS, null))
  t.equal((await store.consume('acme', askOf(LIMITS, BAN))).outcome, 'key_banned', 'still banned after 1,000 anonymous clients (table of 5)')

  now += 11_000 // the ban is over; its escalation is remembered for a day
  for (let i = 0; i < 1000; i++) await store.consume(`ip:203.0.${i >> 8}.${i & 0xff}`, askOf(LIMITS, null))
  t.equal((await store.peek('acme', askOf(LIMITS))).minute.count, 2, 'the key\'s minute window survived too')
  now += 60_000
  t.equal((await store.consume('acme', askOf(LIMITS, BAN))).outcome, 'ok')
  t.equal((await store.consume('acme', askOf(LIMITS, BAN))).outcome, 'ok')
  t.equal((await store.consume('acme', askOf(LIMITS, BAN))).outcome, 'rate_limited')
  const second = await store.consume('acme', askOf(LIMITS, BAN))
  t.equal(second.outcome, 'ban_started')
  t.equal(second.bannedUntil, now + 20_000, 'second ban doubled: the escalation history was kept with the key')
})

t.test('the anonymous table is bounded on its own and evicts a client not seen since it was placed (second chance)', async (t) => {
  const store = createMemoryStore({ now: () => 1_700_000_000_000, maxAnonymousStates: 3 })
  for (const ip of ['a', 'b', 'c']) await store.consume(`ip:${ip}`, askOf(LIMITS, null))
  await store.consume('ip:a', askOf(LIMITS, null))
  await store.consume('ip:d', askOf(LIMITS, null)) // evicts b: a was seen again (its second chance), b is the oldest placed not seen since
  t.equal((await store.peek('ip:a', askOf(LIMITS))).minute.count, 2)
  t.equal((await store.peek('ip:b', askOf(LIMITS))).minute.count, 0, 'evicted: a fresh window')
  t.equal((await store.peek('ip:c', askOf(LIMITS))).minute.count, 1)
  await store.close()
})
