// `store expire-leaked`: the one-off repair of day hashes an older grant script left without an expiry
// (limiter/redis/day-expiry-sweep.ts), run by an operator against the Redis the gateways share, as
// REDIS_URL (or REDIS_CLUSTER_NODES / REDIS_SENTINELS) names it. Safe beside running gateways: it
// scans in small paced pages and only adds an expiry where there is none.
import { parseArgs } from 'node:util'
import { createRedisClient, describeRedis, waitReady } from '../gateway/redis/connection.js'
import { sweepDayExpiry } from '../gateway/limiter/redis/day-expiry-sweep.js'
import { settingsFromEnv } from '../gateway/runtime/settings.js'
import { CommandError } from './errors.js'

type Out = (line: string) => void

/** How long the command waits for Redis to answer at all. */
const CONNECT_WAIT_MS = 5_000

export async function storeExpireLeaked (args: string[], out: Out): Promise<number> {
  const { values } = parseArgs({ args, options: { 'dry-run': { type: 'boolean' } } })
  const dryRun = values['dry-run'] === true
  const settings = settingsFromEnv()
  const client = createRedisClient(settings)
  if (client === undefined) throw new CommandError('store expire-leaked needs REDIS_URL (or REDIS_CLUSTER_NODES / REDIS_SENTINELS): the Redis the gateways share')
  client.on('error', () => { /* a connection that never comes up is said once below */ })
  try {
    if (!await waitReady(client, CONNECT_WAIT_MS)) throw new CommandError(`Redis (${describeRedis(settings).nodes.join(', ')}) did not answer within ${CONNECT_WAIT_MS / 1000} s`)
    const report = await sweepDayExpiry(client, { dryRun })
    const verb = dryRun ? 'would get' : 'given'
    out(`${report.dayHashes} day hashes scanned; ${report.paired} without an expiry ${verb} their limiter hash's, ${report.orphaned} without a limiter hash ${verb} a day${dryRun ? ' (dry run: nothing changed)' : ''}`)
    return 0
  } finally {
    client.disconnect()
  }
}
