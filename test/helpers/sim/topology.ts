// Where the simulated processes' commands go: one Redis (shard '', as the production port names it),
// or a Redis Cluster of several nodes — each a modelled Redis with its own keyspace, clock and faults —
// whose 16,384 slots are split in ranges between the nodes, as `ioredis-port.ts` sees a real one: a
// key's command goes to the node serving its slot now (a client follows MOVED), each node carries its
// own epoch mark (`rl:{#epoch-<node>}`), and one grant call never spans two slots (CROSSSLOT).
// A slot migration moves a slot's keys to another node atomically; a failover replaces a node's data
// with its replica's copy, taken `lag` ms before (acknowledged writes lost, the epoch mark kept).
import calculateSlot, { generateMulti } from 'cluster-key-slot'
import type { SimRedis } from './redis-model.js'

export interface Topology {
  /** Every node's shard name. */
  readonly shards: readonly string[]
  /** The shard serving `key` now. */
  nodeOf: (key: string) => string
  node: (shard: string) => SimRedis
  /** Keys one call may carry together: '' on one Redis, the slot on a Cluster. */
  groupOf: (key: string) => string
  epochKey: (shard: string) => string
  /** True when `keys` span more than one slot (a Cluster refuses the call: CROSSSLOT). */
  crossSlot: (keys: readonly string[]) => boolean
}

const SINGLE_EPOCH_KEY = 'rl:{#epoch}'

export function singleRedis (redis: SimRedis): Topology {
  return { shards: [''], nodeOf: () => '', node: () => redis, groupOf: () => '', epochKey: () => SINGLE_EPOCH_KEY, crossSlot: () => false }
}

const SLOTS = 16_384
const EPOCH_TAG = /^rl:\{#epoch-(.+)\}$/

/** A Cluster of `nodes` (shards `n0`, `n1`, …), slots in equal ranges; `moved` slots served elsewhere. */
export class SimCluster implements Topology {
  readonly shards: readonly string[]
  private readonly moved = new Map<number, number>()

  private readonly nodes: readonly SimRedis[]

  constructor (nodes: readonly SimRedis[]) {
    this.nodes = nodes
    this.shards = nodes.map((_, i) => `n${i}`)
  }

  private ownerOf (slot: number): number {
    return this.moved.get(slot) ?? Math.floor(slot * this.nodes.length / SLOTS)
  }

  nodeOf = (key: string): string => {
    const epoch = EPOCH_TAG.exec(key)
    return epoch !== null ? epoch[1]! : this.shards[this.ownerOf(calculateSlot(key))]!
  }

  node = (shard: string): SimRedis => this.nodes[this.shards.indexOf(shard)]!

  groupOf = (key: string): string => String(calculateSlot(key))

  epochKey = (shard: string): string => `rl:{#epoch-${shard}}`

  crossSlot = (keys: readonly string[]): boolean => keys.length > 1 && generateMulti([...keys]) === -1

  /** The index of the node serving `key` now. */
  indexOf (key: string): number {
    return this.shards.indexOf(this.nodeOf(key))
  }

  /** Migrates the slot of `keys` (one hash tag) to node `to`: its keys move with their data, at once. */
  migrate (keys: readonly string[], to: number): void {
    const slot = calculateSlot(keys[0]!)
    const from = this.ownerOf(slot)
    if (from === to) return
    this.nodes[from]!.moveKeys(this.nodes[to]!, keys)
    this.moved.set(slot, to)
  }
}
