// The pets resource: list (keyset-paged, optional status filter), create, and fetch one by id.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { backendErrors, registerMethodNotAllowed } from '../../interface/errors.js'
import { decodeCursor, toPage } from '../paging.js'
import { newPetSchema } from '../../interface/schemas.js'
import type { NewPet, PetStatus } from '../../interface/schemas.js'
import type { PetStore } from '../store.js'

export interface PetsRoutesOptions {
  store: PetStore
}

interface ListQuery {
  limit: number
  status?: PetStatus
  cursor?: string
}

const JSON_TYPE_OF_SCHEMA_TYPE: Readonly<Record<string, string>> = { integer: 'number', number: 'number', string: 'string' }

/**
 * The validator coerces types (query strings and path parameters arrive as text), which would turn
 * `"categoryId": "7"` or `"name": 12` into valid values. A JSON body carries its own types, so those are
 * rejected before validation.
 */
async function rejectMistypedFields (request: FastifyRequest): Promise<void> {
  const body = request.body
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return
  for (const [field, fieldSchema] of Object.entries(newPetSchema.properties)) {
    if (!Object.hasOwn(body, field)) continue
    const expected = JSON_TYPE_OF_SCHEMA_TYPE[fieldSchema.type]
    const value: unknown = (body as Record<string, unknown>)[field]
    if (typeof value !== expected || value === null) {
      throw backendErrors.mistypedField(field, fieldSchema.type)
    }
  }
}

export const petsRoutes: FastifyPluginAsync<PetsRoutesOptions> = async function petsRoutes (app, { store }) {
  app.get<{ Querystring: ListQuery }>('/v1/pets', {
    schema: {
      querystring: { $ref: 'PetListQuery#' },
      response: { 200: { $ref: 'Pets#' } }
    }
  }, async function listPets (request, reply) {
    const { limit, status, cursor } = request.query
    const afterId = decodeCursor('pets', cursor)
    const rows = store.listPets({ limit: limit + 1, afterId, status })
    const page = toPage(rows, 'pets', '/v1/pets', limit, { status })
    if (page.link !== undefined) reply.header('link', page.link)
    return page.items
  })

  app.post<{ Body: NewPet }>('/v1/pets', {
    schema: {
      body: { $ref: 'NewPet#' },
      response: { 201: { $ref: 'Pet#' } }
    },
    preValidation: rejectMistypedFields
  }, async function createPet (request, reply) {
    const { name, categoryId, status } = request.body
    const pet = store.createPet({ name: name.trim(), categoryId, status })
    return reply.code(201).header('location', `/v1/pets/${pet.id}`).send(pet)
  })

  app.get<{ Params: { petId: number } }>('/v1/pets/:petId', {
    schema: {
      params: { $ref: 'PetIdParams#' },
      response: { 200: { $ref: 'Pet#' } }
    }
  }, async function getPet (request) {
    const { petId } = request.params
    const pet = store.getPet(petId)
    if (pet === undefined) throw backendErrors.petNotFound(petId)
    return pet
  })

  registerMethodNotAllowed(app, '/v1/pets', ['GET', 'POST'])
  registerMethodNotAllowed(app, '/v1/pets/:petId', ['GET'])
}
