// Consumers as the admin API sees them: a consumer is the set of credentials (keys.yaml entries)
// that share one `consumerId`, and with it one set of windows, bans and usage in the limiter. The
// index is built once per config snapshot (a reload makes a new snapshot), not per admin request.
import type { ConfigSnapshot, KeyRecord } from '../config/types.js'

export interface Consumer {
  readonly id: string
  /** Its credentials in keys.yaml order; plan and limits agree across them (the loader checks). */
  readonly credentials: readonly KeyRecord[]
}

const indexes = new WeakMap<ConfigSnapshot, ReadonlyMap<string, Consumer>>()

function consumersOf (snapshot: ConfigSnapshot): ReadonlyMap<string, Consumer> {
  let index = indexes.get(snapshot)
  if (index === undefined) {
    const byId = new Map<string, KeyRecord[]>()
    for (const key of snapshot.keysById.values()) {
      const list = byId.get(key.consumerId)
      if (list === undefined) byId.set(key.consumerId, [key])
      else list.push(key)
    }
    index = new Map([...byId].map(([id, credentials]) => [id, { id, credentials }]))
    indexes.set(snapshot, index)
  }
  return index
}

/**
 * The consumer `id` names: a consumer id first, else the consumer of the credential with that id
 * (so `keys show <any key id>` works after a rotation gave the consumer a second credential).
 */
export function resolveConsumer (snapshot: ConfigSnapshot, id: string): Consumer | undefined {
  const consumers = consumersOf(snapshot)
  const direct = consumers.get(id)
  if (direct !== undefined) return direct
  const key = snapshot.keysById.get(id)
  return key === undefined ? undefined : consumers.get(key.consumerId)
}
