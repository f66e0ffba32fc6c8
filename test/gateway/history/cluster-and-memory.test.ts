// The history beyond a standalone Redis: on a 3-master Cluster a flush of many consumers (keys in
// slots of every master) is grouped per node and read back whole; in process memory, days older
// than the 35 served and shadow hours older than the last 24 are dropped at the next write.
import t from 'tap'
import { Cluster } from 'ioredis'
import { createMemoryHistory } from '../../../src/gateway/history/memory-history.js'
import { createRedisHistory } from '../../../src/gateway/history/redis-history.js'
import { DAY_MS, dayOf, HOUR_MS, hourOf } from '../../../src/gateway/history/days.js'
import { USAGE_HISTORY_DAYS } from '../../../src/gateway/history/store.js'
import type { UsageCell } from '../../../src/gateway/history/tally.js'
import { startRedisCluster } from '../../helpers/redis.js'

const NOW = Date.UTC(2030, 3, 10, 12)

function usageCell (consumerId: string, day: number, admitted: number, rejected = 0): UsageCell {
  return { consumerId, day, admitted, units: admitted, rejected, overage: 0 }
}

function shadowCell (consumerId: string, hour: number, rejections: number): { plan: string, consumerId: string, hour: number, rejections: number, admitted: number, first: number, last: number } {
  return { plan: 'free', consumerId, hour, rejections, admitted: rejections, first: hour * HOUR_MS, last: hour * HOUR_MS + 1 }
}

t.test('a Cluster: one flush of 60 consumers spread over every master, read back whole', async (t) => {
  const cluster = await startRedisCluster(t)
  const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })))
  await new Promise((resolve) => client.once('ready', resolve))
  const history = createRedisHistory(client)
  t.teardown(() => history.close())
  const ids = Array.from({ length: 60 }, (_, i) => `tenant-${i}`)
  const unsent = await history.write({
    usage: ids.map((id, i) => usageCell(id, dayOf(NOW), i + 1, i % 2)),
    shadow: ids.map((id, i) => shadowCell(id, hourOf(NOW), i + 1)),
    months: []
  })
  t.same(unsent, { usage: [], shadow: [], months: [] }, 'every node took its part')
  const masters = await Promise.all(cluster.ports.map(async (port) => Number(await cluster.cli(port, 'DBSIZE'))))
  t.ok(masters.filter((n) => n > 0).length >= 2, `keys on several masters (${masters.join(', ')})`)
  for (const [i, id] of ids.entries()) {
    t.same(await history.usage(id, dayOf(NOW), dayOf(NOW)), [{ day: dayOf(NOW), admitted: i + 1, units: i + 1, rejected: i % 2, overage: 0 }], id)
  }
  const summary = await history.shadow('free', hourOf(NOW) - 24, hourOf(NOW), 100)
  t.equal(summary.consumers, 60)
  t.equal(summary.rejections, (60 * 61) / 2)
  t.equal(summary.top.length, 60)
  t.same(summary.top[0], { consumerId: 'tenant-59', rejections: 60, admitted: 60, first: hourOf(NOW) * HOUR_MS, last: hourOf(NOW) * HOUR_MS + 1 })
})

t.test('in process memory: what is older than the days and hours served is dropped', async (t) => {
  let clock = NOW
  const history = createMemoryHistory({ now: () => clock })
  const today = dayOf(NOW)
  await history.write({
    usage: [usageCell('acme', today - USAGE_HISTORY_DAYS + 1, 5), usageCell('acme', today, 7)],
    shadow: [shadowCell('acme', hourOf(NOW) - 24, 2), shadowCell('acme', hourOf(NOW), 3)],
    months: []
  })
  t.same(await history.usage('acme', today - USAGE_HISTORY_DAYS + 1, today - USAGE_HISTORY_DAYS + 1), [{ day: today - USAGE_HISTORY_DAYS + 1, admitted: 5, units: 5, rejected: 0, overage: 0 }])
  t.same((await history.shadow('free', hourOf(NOW) - 24, hourOf(NOW), 5)).top[0]?.rejections, 5)

  clock = NOW + DAY_MS
  await history.write({ usage: [], shadow: [], months: [] })
  const oldest = today - USAGE_HISTORY_DAYS + 1
  t.same(await history.usage('acme', oldest, oldest), [{ day: oldest, admitted: 0, units: 0, rejected: 0, overage: 0 }], 'the 36th day back is gone')
  t.same(await history.usage('acme', today, today), [{ day: today, admitted: 7, units: 7, rejected: 0, overage: 0 }], 'a day still served stays')
  const shadow = await history.shadow('free', hourOf(NOW) - 48, hourOf(NOW), 5)
  t.same(shadow.top.map((r) => r.rejections), [3], 'the hour now 48 h old is gone, even when asked for; the one 24 h old stays')
  t.match(shadow, { consumers: 1, rejections: 3 })
  await history.close()
  t.same(await history.usage('acme', today, today), [{ day: today, admitted: 0, units: 0, rejected: 0, overage: 0 }], 'closed: nothing kept')
})
