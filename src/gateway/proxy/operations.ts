// The public operations of the Pet Store interface: the only method/path pairs the gateway
// forwards. Everything else is answered at the edge (404 unknown path, 405 other method).
import type { HTTPMethods } from 'fastify'

export interface Operation {
  readonly operationId: string
  readonly method: HTTPMethods
  /** Fastify route pattern, also the `route` label of metrics. */
  readonly path: string
}

export const OPERATIONS: readonly Operation[] = Object.freeze([
  { operationId: 'listPets', method: 'GET', path: '/v1/pets' },
  { operationId: 'createPet', method: 'POST', path: '/v1/pets' },
  { operationId: 'getPet', method: 'GET', path: '/v1/pets/:petId' },
  { operationId: 'listOrders', method: 'GET', path: '/v1/store/orders' }
])

/** Path → methods allowed on it. */
export function methodsByPath (operations: readonly Operation[] = OPERATIONS): Map<string, HTTPMethods[]> {
  const byPath = new Map<string, HTTPMethods[]>()
  for (const op of operations) {
    const methods = byPath.get(op.path) ?? []
    methods.push(op.method)
    byPath.set(op.path, methods)
  }
  return byPath
}
