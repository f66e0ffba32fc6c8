// The simulator is only as good as its model of Redis: the same seeded sequence of grant calls
// (several ids, costs, rejections, bans, reserves of several holders, give-backs and write-backs,
// month limits, reads) runs on a real redis-server and then on the simulator's Redis
// (test/helpers/sim/redis-model.ts) at the very instants the real one reported, and every reply and
// every stored field must be the same. Lua 5.1 in Redis, 5.4 in the simulator: the script is written
// so the two read it alike (lua/grant.lua's header), and this test is where that is checked.
import { Redis } from 'ioredis'
import t from 'tap'
import { ioredisPort } from '../../../../src/gateway/limiter/redis/ioredis-port.js'
import { GRANT, grantArgs, grantKeys, type Adjustment, type GrantEntry } from '../../../../src/gateway/limiter/redis/scripts.js'
import { createLuaVm, SimRedis } from '../../../helpers/sim/redis-model.js'
import { prng, World } from '../../../helpers/sim/world.js'
import { sleep } from '../../../helpers/poll.js'
import { startRedis } from '../../../helpers/redis.js'
import { FIELD } from '../../../../src/gateway/limiter/redis/layout.js'

const CALLS = 400
const IDS = ['a', 'b', 'c', 'd']
const HOLDERS = ['p1', 'p2', 'p3']
const FIELDS = [FIELD.minuteNewest, FIELD.minuteUnits, FIELD.minuteOldest, FIELD.dayNewest, FIELD.dayUnits, FIELD.dayOldest, FIELD.dayNewestUnits,
  FIELD.month, FIELD.monthUnits, FIELD.banEnd, FIELD.lastBanEnd, FIELD.banLevel, FIELD.recentRejections, FIELD.reserves, FIELD.expiry]

interface Call { holder: string, entries: GrantEntry[] }

function sequence (seed: number): Call[] {
  const random = prng(seed)
  const int = (a: number, b: number): number => a + Math.floor(random() * (b - a + 1))
  const calls: Call[] = []
  for (let i = 0; i < CALLS; i++) {
    const entries: GrantEntry[] = []
    for (let e = int(1, 3); e > 0; e--) {
      const id = IDS[int(0, IDS.length - 1)]!
      const minuteLimit = [3, 5, 20][int(0, 2)]!
      const adjustments: Adjustment[] = random() < 0.15 ? [{ minute: 0, day: 0, month: 0, delta: int(-2, 3) }] : []
      entries.push({
        key: `rl:{${id}}`,
        minuteLimit,
        dayLimit: minuteLimit * int(1, 3),
        monthLimit: random() < 0.3 ? minuteLimit * 4 : 0,
        monthSoft: random() < 0.3,
        requests: int(0, 4),
        cost: int(1, 3),
        extra: int(0, 3),
        reserve: int(0, 4),
        write: random() < 0.9,
        ban: random() < 0.5 ? { threshold: int(1, 4), windowSeconds: 60, durationSeconds: 2, maxDurationSeconds: 8 } : null,
        adjustments,
        blocksBucket: -1,
        blocks: int(0, 3)
      })
    }
    calls.push({ holder: HOLDERS[int(0, HOLDERS.length - 1)]!, entries })
  }
  return calls
}

/** Adjustments name buckets: filled in at run time from the last reply's Redis time (give-backs and write-backs into this or the last second). */
function withBuckets (entries: GrantEntry[], now: number): GrantEntry[] {
  return entries.map((e) => ({
    ...e,
    adjustments: e.adjustments.map((a, i) => ({ minute: Math.floor(now / 1000) - (i % 2), day: Math.floor(now / 900_000), month: new Date(now).getUTCFullYear() * 12 + new Date(now).getUTCMonth(), delta: a.delta }))
  }))
}

t.test('the simulator\'s Redis answers the grant script as a real redis-server does', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })
  const port = ioredisPort(client)
  const world = new World(1, 0)
  const sim = new SimRedis(world, 0, await createLuaVm())
  let lastNow = Date.now()
  let differing = 0
  let compared = 0
  for (const [i, call] of sequence(20_261_126).entries()) {
    const entries = withBuckets(call.entries, lastNow)
    const real = await port.run(GRANT, grantKeys(entries), grantArgs(call.holder, entries)) as number[]
    lastNow = real[0]!
    world.now = lastNow
    const modelled = sim.runScript(GRANT, grantKeys(entries), grantArgs(call.holder, entries))
    compared++
    if (JSON.stringify(real) !== JSON.stringify(modelled)) {
      differing++
      if (differing <= 3) t.same(modelled, real, `call ${i}: the same reply`)
    }
    if (i % 50 === 0) await sleep(300) // cross real second boundaries now and then
  }
  t.equal(differing, 0, `${compared} calls, every reply the same`)
  let fields = 0
  const unlike: string[] = []
  for (const id of IDS) {
    const stored = await client.hgetall(`rl:{${id}}`)
    for (const field of [...FIELDS, ...Array.from({ length: 61 }, (_, j) => String(j))]) {
      fields++
      if ((stored[field] ?? undefined) !== sim.peek(`rl:{${id}}`, field)) unlike.push(`${id}.${field}: ${stored[field]} vs ${sim.peek(`rl:{${id}}`, field)}`)
    }
  }
  t.same(unlike, [], `${fields} stored fields compared, all the same`)
})
