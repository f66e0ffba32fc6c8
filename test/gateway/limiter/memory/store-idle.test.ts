// The in-process store forgets an id idle past DEFAULT_MEMORY_IDLE_MS (the day window, or a ban's
// escalation memory, has nothing left to say then), and every lookup — a consume or a peek — renews
// that idle time: the promise the lru-cache TTL kept before the store's tables became second-chance
// maps, held now by the state's own `seenAt`.
import t from 'tap'
import { askOf } from '../../../../src/gateway/limiter/store.js'
import { createMemoryStore, DEFAULT_MEMORY_IDLE_MS } from '../../../../src/gateway/limiter/memory/store.js'


t.test('a lookup renews the idle time; past it, the state reads as new (keys and anonymous clients)', async (t) => {
  let now = 1_700_000_000_000
  const store = createMemoryStore({ now: () => now })
  const longBan = { threshold: 1, windowSeconds: 60, durationSeconds: 10 * 86_400, maxDurationSeconds: 10 * 86_400 }
  const tight = { perMinute: 1, perDay: 100 }
  for (const id of ['acme', 'ip:192.0.2.1']) {
    const outcomes: string[] = []
    for (let i = 0; i < 3; i++) outcomes.push((await store.consume(id, askOf(tight, longBan))).outcome)
    t.strictSame(outcomes, ['ok', 'rate_limited', 'ban_started'], `${id}: banned for ten days`)
  }
  now += DEFAULT_MEMORY_IDLE_MS // exactly the idle time: kept
  t.equal((await store.peek('acme', askOf(tight))).outcome, 'key_banned', 'a peek at exactly the idle time finds the state (and renews it)')
  now += DEFAULT_MEMORY_IDLE_MS // the idle time again since that peek
  t.equal((await store.consume('acme', askOf(tight, longBan))).outcome, 'key_banned', 'kept: the peek renewed it')
  t.equal((await store.consume('ip:192.0.2.1', askOf(tight, longBan))).outcome, 'ok', 'the anonymous client, idle twice the idle time, starts fresh')
  now += DEFAULT_MEMORY_IDLE_MS + 1
  t.equal((await store.consume('acme', askOf(tight, longBan))).outcome, 'ok', 'the key, idle 1 ms past the idle time, starts fresh though its ban had days to run')
  await store.close()
})

t.test('listBans skips a state idle past the idle time, whatever its ban had left to run', async (t) => {
  let now = 1_700_000_000_000
  const store = createMemoryStore({ now: () => now })
  const longBan = { threshold: 1, windowSeconds: 60, durationSeconds: 10 * 86_400, maxDurationSeconds: 10 * 86_400 }
  for (let i = 0; i < 3; i++) await store.consume('acme', askOf({ perMinute: 1, perDay: 100 }, longBan))
  now += DEFAULT_MEMORY_IDLE_MS
  t.strictSame((await store.admin.listBans()).map((entry) => entry.id), ['acme'], 'listed at exactly the idle time (listing renews nothing)')
  now += 1
  t.strictSame(await store.admin.listBans(), [], 'not listed 1 ms past it (as lru-cache skipped stale entries)')
  await store.close()
})
