// What a Redis keeps across its own restart, and whether the config in force needs it kept. Minute
// and day windows, bans and their escalation refill within a day on their own, but a month quota's
// units and a soft quota's overage are what consumers are billed for: on a Redis that keeps nothing
// (no AOF, no RDB snapshots) one restart forgets the month (consumers admitted again past their
// quota, the overage units never billed). Read with CONFIG GET on every master (each Cluster
// master); managed Redis often renames or denies CONFIG, and then the answer is `unknown`, never a
// guess. persistence-check.ts turns this into a start-up log line and a /readyz detail.
import { Cluster, type Redis } from 'ioredis'
import type { ConfigSnapshot, Limits } from '../config/types.js'
import { settlesWithin, within } from '../history/deadline.js'
import { createRedisClient, type RedisClient, type RedisSettings, waitReady } from './connection.js'

/** The connection a reading opens (CLIENT LIST shows it while it reads; it is closed right after). */
export const PERSISTENCE_CHECK_CONNECTION = 'petstore-persistence-check'

/** `aof`: appendonly yes; `rdb`: snapshots only (`save` set): counts since the last one are lost; `none`: nothing survives a restart. */
export type PersistenceMode = 'aof' | 'rdb' | 'none'

export type NodePersistence =
  | { readonly node: string, readonly mode: PersistenceMode, readonly appendfsync?: string | undefined }
  | { readonly node: string, readonly mode: 'unknown', readonly reason: string }

/** Every master's answer, or why none could be asked (Redis not answering). */
export type PersistenceReading =
  | { readonly state: 'read', readonly nodes: readonly NodePersistence[] }
  | { readonly state: 'unreachable', readonly reason: string }

/** The features in force whose counts only Redis holds and are billed: month quotas, soft quotas' overage. */
export function persistenceNeeds (snapshot: ConfigSnapshot): string[] {
  const limits: Array<Limits | undefined> = [...snapshot.plans.values(), snapshot.anonymous]
  for (const key of snapshot.keysById.values()) limits.push(key.limits)
  const needs: string[] = []
  if (limits.some((l) => l?.perMonth !== undefined)) needs.push('month quotas (perMonth)')
  if (limits.some((l) => l?.perMonth !== undefined && l.overage === true)) needs.push('overage (overage: allow)')
  return needs
}

/** The mode of one node from its `CONFIG GET appendonly` and `CONFIG GET save` answers. */
export function persistenceMode (appendonly: string | undefined, save: string | undefined): PersistenceMode {
  if (appendonly === 'yes') return 'aof'
  return save !== undefined && save.trim() !== '' ? 'rdb' : 'none'
}

/** The warning a reading earns when the config needs what Redis does not keep; undefined when none is due. */
export function persistenceWarning (needs: readonly string[], reading: PersistenceReading): string | undefined {
  if (needs.length === 0 || reading.state !== 'read') return undefined
  const forgetting = reading.nodes.filter((n) => n.mode === 'none').map((n) => n.node)
  if (forgetting.length === 0) return undefined
  return `Redis ${forgetting.join(', ')} keeps nothing across a restart (appendonly no, save ""), but ${needs.join(' and ')} are configured: ` +
    'a Redis restart forgets the month\'s units and overage (consumers admitted again past their quota, overage never billed); ' +
    'run Redis with appendonly yes and appendfsync everysec on a volume (docs/deployment.md)'
}

/** `CONFIG GET name`'s value on one node; throws when CONFIG is renamed, denied by ACL or unanswered. */
async function configValue (node: RedisClient, name: string, timeoutMs: number): Promise<string | undefined> {
  const reply = await within(node.config('GET', name) as Promise<unknown>, timeoutMs, `CONFIG GET ${name}`)
  return Array.isArray(reply) && typeof reply[1] === 'string' ? reply[1] : undefined
}

/** `host:port` of the server a connection reached (through Sentinel: the master it was sent to, not a sentinel). */
function addressOf (node: Redis): string {
  const socket = node.stream as Redis['stream'] | undefined
  if (socket?.remoteAddress !== undefined && socket.remotePort !== undefined) return `${socket.remoteAddress}:${socket.remotePort}`
  return `${node.options.host ?? '?'}:${node.options.port ?? '?'}`
}

async function readNode (node: RedisClient, where: string, timeoutMs: number): Promise<NodePersistence> {
  try {
    const [appendonly, save, appendfsync] = await Promise.all(['appendonly', 'save', 'appendfsync'].map(async (name) => await configValue(node, name, timeoutMs)))
    const mode = persistenceMode(appendonly, save)
    return mode === 'aof' ? { node: where, mode, appendfsync } : { node: where, mode }
  } catch (err) {
    return { node: where, mode: 'unknown', reason: err instanceof Error ? err.message : String(err) }
  }
}

/**
 * Each master's persistence, on a connection of its own opened for this reading and closed after it
 * (the limiter's connections, timeouts and breaker never see it). `timeoutMs` bounds the connection
 * and each command.
 */
export async function readPersistence (settings: RedisSettings, timeoutMs: number): Promise<PersistenceReading> {
  const client = createRedisClient(settings, { connectionName: PERSISTENCE_CHECK_CONNECTION, connectTimeout: timeoutMs })
  if (client === undefined) return { state: 'read', nodes: [] }
  client.on('error', () => {}) // a Redis that does not answer is the reading's `unreachable`, said once by the caller
  try {
    if (!await waitReady(client, timeoutMs)) return { state: 'unreachable', reason: `Redis not ready within ${timeoutMs} ms` }
    const masters: Array<[RedisClient, string]> = client instanceof Cluster
      ? client.nodes('master').map((node) => [node, addressOf(node)])
      : [[client, addressOf(client)]]
    return { state: 'read', nodes: await Promise.all(masters.map(async ([node, where]) => await readNode(node, where, timeoutMs))) }
  } finally {
    // QUIT after the replies still due (a CONFIG GET that lost its race answers first); a Redis that does not answer is dropped.
    await settlesWithin(client.quit(), timeoutMs)
    client.disconnect()
  }
}
