// The background ban count behind gateway_banned_keys, over a real in-process store with bans in
// it: counted at start, again soon after refreshSoon (coalesced while a count runs) and on its
// timer, never when it is read, and the last count kept while the store fails.
import { askOf } from '../../../src/gateway/limiter/store.js'
import t from 'tap'
import { createBanCount } from '../../../src/gateway/limiter/ban-count.js'
import type { BanEntry } from '../../../src/gateway/limiter/store.js'
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'
import { EVENT_TIMEOUT_MS, sleep, until } from '../../helpers/poll.js'

const LIMITS = { perMinute: 1, perDay: 100 }
const BAN = { threshold: 1, windowSeconds: 60, durationSeconds: 60, maxDurationSeconds: 600 }

function counted (): { store: ReturnType<typeof createMemoryStore>, listBans: () => Promise<BanEntry[]>, calls: () => number, failing: { on: boolean } } {
  const store = createMemoryStore()
  const failing = { on: false }
  let calls = 0
  return {
    store,
    failing,
    calls: () => calls,
    listBans: async () => {
      calls++
      if (failing.on) throw new Error('store unreachable')
      return await store.admin.listBans()
    }
  }
}

async function ban (store: ReturnType<typeof createMemoryStore>, id: string): Promise<void> {
  for (let i = 0; i < 4; i++) await store.consume(id, askOf(LIMITS, BAN))
}

t.test('counted at start and after refreshSoon; reading never counts', async (t) => {
  const { store, listBans, calls } = counted()
  await ban(store, 'a')
  const count = createBanCount(listBans, 3_600_000)
  t.teardown(() => { count.close() })
  t.equal(await until('the first count', () => count.value()), 1)
  await ban(store, 'b')
  for (let i = 0; i < 100; i++) count.value()
  t.equal(count.value(), 1, 'a read shows the last count')
  t.equal(calls(), 1, 'and reads call nothing')
  count.refreshSoon()
  count.refreshSoon()
  count.refreshSoon()
  t.equal(await until('the second count', () => count.value() === 2), true)
  await until('the coalesced counts end', () => calls() === 3, EVENT_TIMEOUT_MS, 5)
  await sleep(50)
  t.equal(calls(), 3, 'three requests: one count at once, the two made while it ran coalesced into one after it')
})

t.test('the timer counts on its own; a failing store keeps the last count', async (t) => {
  const { store, listBans, failing } = counted()
  const count = createBanCount(listBans, 20)
  t.teardown(() => { count.close() })
  t.equal(await until('the first count', () => count.value()), 0)
  await ban(store, 'a')
  t.ok(await until('the timer counted the ban', () => count.value() === 1, EVENT_TIMEOUT_MS, 5))
  failing.on = true
  await ban(store, 'b')
  count.refreshSoon()
  await sleep(100) // a failed count has no effect to wait for
  t.equal(count.value(), 1, 'the store failing: the last count stays')
  count.close()
  failing.on = false
  count.refreshSoon()
  await sleep(50)
  t.equal(count.value(), 1, 'closed: counts no more')
})
