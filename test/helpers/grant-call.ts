// One call of the grant script with one entry on a real Redis, as the store builds it (grantKeys, grantArgs): what the
// Lua tests of test/gateway/limiter/lua/ drive the script with.
import type { Redis } from 'ioredis'
import { GRANT, grantArgs, grantKeys, readGrantReply, type GrantEntry, type GrantReply } from '../../src/gateway/limiter/redis/scripts.js'

/** Runs grant.lua for `entry` as `holder`; Redis's time of the call and the entry's reply. */
export async function grantOnce (client: Redis, holder: string, entry: GrantEntry): Promise<{ now: number, reply: GrantReply }> {
  const { now, replies } = readGrantReply(await client.eval(GRANT.lua, 2, ...grantKeys([entry]), ...grantArgs(holder, [entry])), 1)
  return { now, reply: replies[0]! }
}
