// The one script a plan's shadow records are written with, so an hour's records stay bounded as they
// are written: the cells of a flush are added and, in the same call, the hour's lightest consumers
// beyond SHADOW_KEEP_PER_HOUR are dropped from all four sorted sets at once (a pipeline could not
// keep them in step). What is dropped is still counted in the hour's totals, and every consumer in
// its HyperLogLog, so a read knows how many rejections and (about) how many consumers it no longer
// lists. A call carries at most SHADOW_CELLS_PER_CALL cells: Redis runs a script alone, and a short
// one delays the limiter's calls by well under a millisecond. Defined on the history's own
// connection (ioredis defineCommand: called by SHA, loaded again on NOSCRIPT).
import { createHash } from 'node:crypto'
import type { Cluster, Redis, Result } from 'ioredis'

/** Cells one script call adds at most (5 arguments each). */
export const SHADOW_CELLS_PER_CALL = 100

/**
 * KEYS[1] n  rejections per consumer (sorted set; at most ARGV[1] members after the call)
 * KEYS[2] a  of those, admitted by the enforced limits (sorted set, the same members)
 * KEYS[3] f  first rejection, Unix ms (sorted set, ZADD LT: the earliest whatever the order of flushes)
 * KEYS[4] l  last rejection, Unix ms (sorted set, ZADD GT)
 * KEYS[5] t  the hour's totals (hash): r rejections, a admitted, u rejections of dropped consumers,
 *            e consumers dropped
 * KEYS[6] h  every consumer of the hour (HyperLogLog)
 * ARGV[1] keep: members n keeps; ARGV[2] expiry of every key, Unix s; then per cell 5 arguments:
 *         consumer, rejections, admitted, first, last
 * Returns the number of consumers this call dropped.
 */
export const SHADOW_ADD_LUA = `
local keep = tonumber(ARGV[1])
local rejections, admitted = 0, 0
local members = {}
for i = 3, #ARGV, 5 do
  local member = ARGV[i]
  local r, a = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  redis.call('ZINCRBY', KEYS[1], r, member)
  if a > 0 then redis.call('ZINCRBY', KEYS[2], a, member) end
  redis.call('ZADD', KEYS[3], 'LT', ARGV[i + 3], member)
  redis.call('ZADD', KEYS[4], 'GT', ARGV[i + 4], member)
  rejections = rejections + r
  admitted = admitted + a
  members[#members + 1] = member
end
if #members == 0 then return 0 end
redis.call('PFADD', KEYS[6], unpack(members))
redis.call('HINCRBY', KEYS[5], 'r', rejections)
redis.call('HINCRBY', KEYS[5], 'a', admitted)
local over = redis.call('ZCARD', KEYS[1]) - keep
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], over)
  local dropped, lost = {}, 0
  for j = 1, #popped, 2 do
    dropped[#dropped + 1] = popped[j]
    lost = lost + tonumber(popped[j + 1])
  end
  redis.call('ZREM', KEYS[2], unpack(dropped))
  redis.call('ZREM', KEYS[3], unpack(dropped))
  redis.call('ZREM', KEYS[4], unpack(dropped))
  redis.call('HINCRBY', KEYS[5], 'u', lost)
  redis.call('HINCRBY', KEYS[5], 'e', #dropped)
else
  over = 0
end
for k = 1, 6 do redis.call('EXPIREAT', KEYS[k], ARGV[2]) end
return over
`

/** What Redis calls the script (a test pins it, so a change is deliberate). */
export const SHADOW_ADD_SHA = createHash('sha1').update(SHADOW_ADD_LUA).digest('hex')

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** See SHADOW_ADD_LUA: keys n a f l t h, then keep, expiry and 5 arguments per cell. */
    petstoreShadowAdd: (n: string, a: string, f: string, l: string, t: string, h: string, ...args: Array<string | number>) => Result<number, Context>
  }
}

/** Defines the script on a connection of the history's (once per client). */
export function defineShadowScript (client: Redis | Cluster): void {
  client.defineCommand('petstoreShadowAdd', { numberOfKeys: 6, lua: SHADOW_ADD_LUA })
}
