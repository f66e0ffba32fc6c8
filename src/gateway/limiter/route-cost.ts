// What a request spends in its consumer's windows: its route's `cost` in routes.yaml (default 1), by
// the route Fastify matched and the method, from an index built once per config snapshot.
import type { ConfigSnapshot } from '../config/types.js'

const indexes = new WeakMap<ConfigSnapshot, ReadonlyMap<string, number>>()

/** Units a request of `method` on the route `routeUrl` spends; HEAD costs what GET does. */
export function routeCost (snapshot: ConfigSnapshot, routeUrl: string | undefined, method: string): number {
  let index = indexes.get(snapshot)
  if (index === undefined) {
    index = new Map(snapshot.routes.filter((route) => route.cost !== 1).map((route) => [`${route.method} ${route.path}`, route.cost]))
    indexes.set(snapshot, index)
  }
  if (index.size === 0 || routeUrl === undefined) return 1
  return index.get(`${method === 'HEAD' ? 'GET' : method} ${routeUrl}`) ?? 1
}
