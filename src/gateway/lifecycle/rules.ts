// routes.yaml's lifecycle rules turned into what the hot path needs: a lookup by route pattern and
// method, with the Deprecation / Sunset / Link / X-API-Stability values formatted once per config
// snapshot (a reload brings a new snapshot, hence a new index), never once per request.
import type { ConfigSnapshot, RouteRule } from '../config/types.js'

export interface LifecycleEntry {
  readonly rule: RouteRule
  /** Deprecation, Sunset and X-API-Stability, as they are sent. */
  readonly headers: Readonly<Record<string, string>>
  /** Our `Link` value, merged into whatever Link the backend sends. */
  readonly link: string | undefined
  /** Unix ms from which the route answers 410; undefined when it is not deprecated. */
  readonly sunset: number | undefined
  readonly deprecated: boolean
}

/** Route pattern → method → entry. */
export type LifecycleIndex = ReadonlyMap<string, ReadonlyMap<string, LifecycleEntry>>

/** RFC 9745: `@` and the Unix time in whole seconds. */
export function deprecationValue (since: number): string {
  return `@${Math.floor(since / 1000)}`
}

/** RFC 8594: an IMF-fixdate, e.g. `Thu, 05 Dec 2030 00:00:00 GMT`. */
export function sunsetValue (sunset: number): string {
  return new Date(sunset).toUTCString()
}

export function successorLink (successor: string): string {
  return `<${encodeURI(successor)}>; rel="successor-version"`
}

export function lifecycleEntry (rule: RouteRule): LifecycleEntry {
  const headers: Record<string, string> = {}
  let link: string | undefined
  if (rule.deprecated !== undefined) {
    headers.deprecation = deprecationValue(rule.deprecated.since)
    headers.sunset = sunsetValue(rule.deprecated.sunset)
    if (rule.deprecated.successor !== undefined) link = successorLink(rule.deprecated.successor)
  }
  if (rule.stability !== undefined) headers['x-api-stability'] = rule.stability
  return Object.freeze({
    rule,
    headers: Object.freeze(headers),
    link,
    sunset: rule.deprecated?.sunset,
    deprecated: rule.deprecated !== undefined
  })
}

const indexes = new WeakMap<ConfigSnapshot, LifecycleIndex>()

export function lifecycleIndex (snapshot: ConfigSnapshot): LifecycleIndex {
  let index = indexes.get(snapshot)
  if (index === undefined) {
    const byPath = new Map<string, Map<string, LifecycleEntry>>()
    for (const rule of snapshot.routes) {
      if (rule.deprecated === undefined && rule.stability === undefined) continue
      const byMethod = byPath.get(rule.path) ?? new Map<string, LifecycleEntry>()
      byMethod.set(rule.method, lifecycleEntry(rule))
      byPath.set(rule.path, byMethod)
    }
    index = byPath
    indexes.set(snapshot, index)
  }
  return index
}

/** The entry for a matched route; HEAD follows the rule of GET, as Fastify serves HEAD from GET. */
export function findLifecycleEntry (index: LifecycleIndex, routeUrl: string, method: string): LifecycleEntry | undefined {
  const byMethod = index.get(routeUrl)
  if (byMethod === undefined) return undefined
  return byMethod.get(method) ?? (method === 'HEAD' ? byMethod.get('GET') : undefined)
}

/** Appends our Link value to the backend's (one comma-joined field, RFC 8288), never replacing it. */
export function mergeLink (existing: string | number | string[] | undefined, ours: string): string {
  if (existing === undefined || existing === '') return ours
  return `${Array.isArray(existing) ? existing.join(', ') : String(existing)}, ${ours}`
}
