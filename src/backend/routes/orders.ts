// The store's orders, read-only over HTTP: a keyset-paged list. No endpoint creates orders (ordering is
// not part of this API version), so over HTTP alone the list is always empty; the README and the OpenAPI
// description say so.
import type { FastifyPluginAsync } from 'fastify'
import { registerMethodNotAllowed } from '../../interface/errors.js'
import { decodeCursor, toPage } from '../paging.js'
import type { PetStore } from '../store.js'

export interface OrdersRoutesOptions {
  store: PetStore
}

interface ListQuery {
  limit: number
  cursor?: string
}

export const ordersRoutes: FastifyPluginAsync<OrdersRoutesOptions> = async function ordersRoutes (app, { store }) {
  app.get<{ Querystring: ListQuery }>('/v1/store/orders', {
    schema: {
      querystring: { $ref: 'OrderListQuery#' },
      response: { 200: { $ref: 'Orders#' } }
    }
  }, async function listOrders (request, reply) {
    const { limit, cursor } = request.query
    const afterId = decodeCursor('orders', cursor)
    const rows = store.listOrders({ limit: limit + 1, afterId })
    const page = toPage(rows, 'orders', '/v1/store/orders', limit)
    if (page.link !== undefined) reply.header('link', page.link)
    return page.items
  })

  registerMethodNotAllowed(app, '/v1/store/orders', ['GET'])
}
