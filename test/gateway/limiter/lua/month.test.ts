// The grant script's calendar: a month quota frees at 00:00 UTC on the 1st, not a millisecond
// before, and the Redis `TIME` it reads has no time zone to get wrong. The script's own month
// arithmetic (lua/grant.lua's month_of: the month index and when the next one starts) is run as
// Redis runs it (Lua 5.1, on a real redis-server) and as the simulator does (Lua 5.4), against
// JavaScript's UTC calendar, at every month start from 1999 to 2101 and 1 ms each side of it.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { createLuaVm, SimRedis } from '../../../helpers/sim/redis-model.js'
import { World } from '../../../helpers/sim/world.js'
import { startRedis } from '../../../helpers/redis.js'

const GRANT = readFileSync(new URL('../../../../src/gateway/limiter/lua/grant.lua', import.meta.url), 'utf8')
/** grant.lua up to its per-call state (its helpers and month_of, defined, none run), then month_of over ARGV. */
const PER_CALL = GRANT.indexOf('local calendar_month, calendar_ends = ')
if (PER_CALL < 0) throw new Error('month.test.ts: grant.lua\'s per-call state (local calendar_month, calendar_ends) not found')
const PROBE = GRANT.slice(0, PER_CALL) +
  'local out = {}\nfor i = 1, #ARGV do local m, e = month_of(tonumber(ARGV[i])); out[#out + 1] = m; out[#out + 1] = e end\nreturn out\n'

const instants: number[] = []
for (let y = 1999; y <= 2101; y++) {
  for (let m = 0; m < 12; m++) {
    const start = Date.UTC(y, m, 1)
    instants.push(start - 1, start, start + 1)
  }
}
const expected = instants.flatMap((ms) => {
  const d = new Date(ms)
  return [d.getUTCFullYear() * 12 + d.getUTCMonth(), Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)]
})

t.test('a real redis-server (Lua 5.1) and the simulator (Lua 5.4) find the UTC month and its end as JavaScript does', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })
  const sim = new SimRedis(new World(1, 0), 0, await createLuaVm())
  const real: number[] = []
  const modelled: number[] = []
  for (let i = 0; i < instants.length; i += 500) {
    const part = instants.slice(i, i + 500).map(String)
    real.push(...await client.eval(PROBE, 0, ...part) as number[])
    modelled.push(...sim.runScript({ name: 'month', sha: 'month-probe', lua: PROBE }, [], part) as number[])
  }
  t.same(real, expected, `${instants.length} instants, Redis: the month and the start of the next`)
  t.same(modelled, expected, 'the simulator: the same')
})
