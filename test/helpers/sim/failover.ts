// What a failover to a replica that missed the last writes takes away from one consumer: what the
// grant calls the node ran in those last `lag` ms counted for it — units admitted and blocks granted,
// and reserve and allowance admissions written back — plus the reserves the node keeps back for it
// beyond the replica's copy (read with the production grant script's read entry, as the admin API
// peeks, on a scratch copy of each side). The checker lets the consumer go over by that many units:
// the stated bound of a fault outside the invariant (docs/simulator.md).
import { GRANT, grantArgs, grantKeys, readGrantReply, type GrantEntry, type GrantReply } from '../../../src/gateway/limiter/redis/scripts.js'
import { limiterKey } from '../../../src/gateway/redis/keys.js'
import { SimRedis, type LuaVm } from './redis-model.js'
import type { Consumer } from './schedules.js'
import type { World } from './world.js'

/** Units one grant call counted, per limiter key, at the world's instant `t`. */
export interface Counted { readonly t: number, readonly key: string, readonly units: number }

/** Logs what every grant call `node` runs counts, per key (blocks, admissions, positive write-backs). */
export function logGrants (world: World, node: SimRedis): Counted[] {
  const log: Counted[] = []
  node.onScript = (script, keys, args, reply) => {
    if (script !== GRANT) return
    const entries = keys.length / 2
    const { replies } = readGrantReply(reply, entries)
    replies.forEach((r, i) => {
      const cost = Number(args[1 + 3 * i]!.split(' ')[4])
      const writtenBack = args[3 + 3 * i]!.split(';').filter((x) => x !== '').reduce((n, adj) => n + Math.max(0, parseInt(adj.split(',')[3]!, 10)), 0)
      const units = r.admitted * cost + r.extra + writtenBack
      if (units > 0) log.push({ t: world.now, key: keys[2 * i]!, units })
    })
  }
  return log
}

/** What `node` holds for consumer `c` now, read on a scratch copy. */
function read (world: World, vm: LuaVm, node: SimRedis, c: Consumer): GrantReply {
  const scratch = new SimRedis(world, node.skew, vm)
  node.copyInto(scratch)
  const entry: GrantEntry = { key: limiterKey(c.id), minuteLimit: c.perMinute, dayLimit: c.perDay, monthLimit: c.perMonth, monthSoft: c.overage, requests: 0, cost: 1, extra: 0, reserve: 0, write: false, blocksBucket: -1, blocks: 0, ban: null, adjustments: [] }
  return readGrantReply(scratch.runScript(GRANT, grantKeys([entry]), grantArgs('sim-checker', [entry])), 1).replies[0]!
}

/**
 * Units consumer `c` loses when `node` fails over now to `replica` (its copy from `since`): counted by the calls since
 * (each on its own: a lost give-back in an older bucket does not offset them) and reserves kept back beyond the replica's.
 */
export function lostUnits (world: World, vm: LuaVm, node: SimRedis, replica: SimRedis, log: readonly Counted[], since: number, c: Consumer): number {
  const key = limiterKey(c.id)
  const counted = log.filter((x) => x.key === key && x.t >= since).reduce((n, x) => n + x.units, 0)
  return counted + Math.max(0, read(world, vm, node, c).held - read(world, vm, replica, c).held)
}
