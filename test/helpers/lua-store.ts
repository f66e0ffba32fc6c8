// The Redis store's decisions on the Lua VM (lua-redis.ts): decide, peek, lease and give back run
// the real scripts on a virtual clock, so the lease table can be driven through minutes of traffic
// in a second. The admin side (bans, reset, pub/sub) is Redis's own and is tested on a real server.
import type { LimiterStore } from '../../src/gateway/limiter/store.js'
import type { LeasingStore } from '../../src/gateway/limiter/stores/leases.js'
import { banArg, leaseArgs, redisKeys, SCRIPTS, toResult, type DecisionReply } from '../../src/gateway/limiter/stores/redis-scripts.js'
import type { LuaRedis, LuaReply } from './lua-redis.js'

export function createLuaStore (redis: LuaRedis): LeasingStore {
  const notHere = async (): Promise<never> => { throw new Error('not on the Lua VM: test it against a real Redis') }
  const decision = (reply: LuaReply): DecisionReply => reply as DecisionReply
  const admin: Pick<LimiterStore, 'listBans' | 'liftBan' | 'escalationLevel' | 'reset'> = { listBans: notHere, liftBan: notHere, escalationLevel: notHere, reset: notHere }
  return {
    kind: 'redis',
    describe: () => ({ kind: 'redis', nodes: [] }),
    consume: async (id, limits, ban) => toResult(decision(redis.run(SCRIPTS.decide, redisKeys(id), [limits.perMinute, limits.perDay, banArg(ban)]))),
    peek: async (id, limits) => toResult(decision(redis.run(SCRIPTS.peek, redisKeys(id).slice(0, 2), [limits.perMinute, limits.perDay]))),
    async lease (id, limits, ban, want, holder, unused) {
      const reply = decision(redis.run(SCRIPTS.lease, redisKeys(id), [limits.perMinute, limits.perDay, banArg(ban), ...leaseArgs(want, holder, unused)]))
      return { result: toResult(reply), granted: reply[9] }
    },
    async giveBack (id, unused) {
      redis.run(SCRIPTS.giveBack, redisKeys(id).slice(0, 2), [unused.minuteBucket, unused.dayBucket, unused.count])
    },
    ...admin,
    watchBanLifts: () => {},
    ping: async () => {},
    close: async () => {},
    shardOf: () => '',
    maxmemoryPolicy: async () => undefined
  }
}
