// The production port (port.ts) over an ioredis client of any topology, and Node's clock and timers.
// On a Cluster a shard is a master (`host:port`) and a batch group is a slot; scripts go by SHA
// (loaded again on NOSCRIPT). A grant call goes as grant-command.ts lays it out: its arguments flat once, its
// integer reply unconverted — per entry, what a long tail of consumers pays on every call.
import { randomBytes } from 'node:crypto'
import calculateSlot from 'cluster-key-slot'
import { Cluster, type Redis } from 'ioredis'
import type { RedisClient } from '../../redis/connection.js'
import { grantSender } from './grant-command.js'
import { unrefAfter } from './outage.js'
import type { RedisPort, Runtime, Script } from './port.js'
import { EPOCH, GRANT } from './scripts.js'

type Call = (...args: string[]) => Promise<unknown>

/** The epoch mark of a single Redis; on a Cluster, `rl:{#epoch-N}` with N picked for the shard. */
const EPOCH_KEY = 'rl:{#epoch}'

export function nodeRuntime (): Runtime {
  return {
    now: () => performance.timeOrigin + performance.now(),
    after: unrefAfter,
    turnEnd: (fn) => { setImmediate(fn) },
    randomId: () => randomBytes(8).toString('hex')
  }
}

function nodeName (node: Redis): string {
  return `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`
}

export function ioredisPort (client: RedisClient): RedisPort {
  const cluster = client instanceof Cluster ? client : undefined
  client.defineCommand('petstoreEpoch', { numberOfKeys: 1, lua: EPOCH.lua })
  const commands = client as unknown as Record<'petstoreEpoch', Call>
  const grant = grantSender(client)

  return {
    run (script: Script, keys, args) {
      if (script === GRANT) return grant(keys, args)
      return commands.petstoreEpoch(keys[0]!, ...args)
    },
    shards: cluster === undefined ? () => [''] : () => [...new Set(cluster.slots.map((owners) => owners[0] ?? ''))].filter((name) => name !== ''),
    shardOf: cluster === undefined ? () => '' : (key) => cluster.slots[calculateSlot(key)]?.[0] ?? '',
    groupOf: cluster === undefined ? () => '' : (key) => String(calculateSlot(key)),
    epochKey (shard) {
      for (let candidate = 0; cluster !== undefined && candidate < 1_000_000; candidate++) {
        if (cluster.slots[calculateSlot(`rl:{#epoch-${candidate}}`)]?.[0] === shard) return `rl:{#epoch-${candidate}}`
      }
      return EPOCH_KEY
    },
    async ping (shard) {
      const node = cluster === undefined ? client as Redis : cluster.nodes('master').find((node) => nodeName(node) === shard)
      if (node === undefined) throw new Error(`no connection to ${shard}`)
      await node.ping()
    },
    watch (listener) {
      const attach = (node: Redis, shard: () => string): void => {
        node.on('close', () => { listener(shard(), false) })
        node.on('ready', () => { listener(shard(), true) })
      }
      if (cluster === undefined) {
        attach(client as Redis, () => '')
        return
      }
      for (const node of cluster.nodes('master')) attach(node, () => nodeName(node))
      cluster.on('+node', (node: Redis) => { attach(node, () => nodeName(node)) })
    }
  }
}
