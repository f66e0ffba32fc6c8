// JSON Schemas of the interface: the resources, parameters and the Error shape the Pet Store API
// answers. They belong to neither process and are the single source of truth: the backend validates
// and serialises with them, and the gateway generates its OpenAPI document from them.

/** Largest id accepted or issued: 2^53 − 1, the largest integer JSON clients read exactly. */
export const MAX_ID = Number.MAX_SAFE_INTEGER
export const DEFAULT_PAGE_LIMIT = 20
export const MAX_PAGE_LIMIT = 100
export const MAX_NAME_LENGTH = 200

export const PET_STATUSES = ['available', 'pending', 'sold'] as const
export type PetStatus = (typeof PET_STATUSES)[number]
export const DEFAULT_PET_STATUS: PetStatus = 'available'

export const ORDER_STATUSES = ['placed', 'approved', 'delivered'] as const
export type OrderStatus = (typeof ORDER_STATUSES)[number]

// C0 and C1 control characters; `\s` outside them is whitespace that trimming removes.
const CONTROL = '\\u0000-\\u001f\\u007f-\\u009f'
/** 1–200 characters once leading and trailing whitespace is trimmed, no control characters anywhere. */
export const NAME_PATTERN =
  `^[^\\S${CONTROL}]*[^\\s${CONTROL}](?:[^${CONTROL}]{0,${MAX_NAME_LENGTH - 2}}[^\\s${CONTROL}])?[^\\S${CONTROL}]*$`

export const petStatusSchema = {
  $id: 'PetStatus',
  type: 'string',
  enum: PET_STATUSES,
  description: 'Availability status of an animal'
} as const

const idSchema = {
  type: 'integer',
  minimum: 1,
  maximum: MAX_ID
} as const

export const newPetSchema = {
  $id: 'NewPet',
  type: 'object',
  description: 'An animal to add to the catalogue. Unknown fields are rejected.',
  required: ['name', 'categoryId'],
  additionalProperties: false,
  properties: {
    name: {
      type: 'string',
      minLength: 1,
      pattern: NAME_PATTERN,
      description: `The animal's name: 1–${MAX_NAME_LENGTH} characters after trimming surrounding whitespace, no control characters. Stored trimmed.`
    },
    categoryId: {
      ...idSchema,
      format: 'int64',
      description: 'Identifier of the category the animal belongs to'
    },
    status: {
      type: 'string',
      enum: PET_STATUSES,
      default: DEFAULT_PET_STATUS,
      description: `Availability status; \`${DEFAULT_PET_STATUS}\` when omitted`
    }
  }
} as const

export const petSchema = {
  $id: 'Pet',
  type: 'object',
  description: 'An animal of the catalogue',
  required: ['id', 'name', 'categoryId', 'status'],
  additionalProperties: false,
  properties: {
    id: { ...idSchema, format: 'int64', description: 'Unique identifier assigned by the service on creation; increasing' },
    name: { type: 'string', description: "The animal's name" },
    categoryId: { ...idSchema, format: 'int64', description: 'Identifier of the category the animal belongs to' },
    status: { $ref: 'PetStatus#' }
  }
} as const

export const petsSchema = {
  $id: 'Pets',
  type: 'array',
  description: 'A page of animals, ordered by id ascending',
  items: { $ref: 'Pet#' }
} as const

export const orderSchema = {
  $id: 'Order',
  type: 'object',
  description: 'An order of the store',
  required: ['id', 'petId', 'quantity', 'status'],
  additionalProperties: false,
  properties: {
    id: { ...idSchema, format: 'int64', description: 'Unique identifier of the order; increasing' },
    petId: { ...idSchema, format: 'int64', description: 'Identifier of the ordered animal' },
    quantity: { type: 'integer', minimum: 1, description: 'Number of items ordered' },
    status: { type: 'string', enum: ORDER_STATUSES, description: 'State of the order' }
  }
} as const

export const ordersSchema = {
  $id: 'Orders',
  type: 'array',
  description: 'A page of orders, ordered by id ascending',
  items: { $ref: 'Order#' }
} as const

const limitSchema = {
  type: 'integer',
  minimum: 1,
  maximum: MAX_PAGE_LIMIT,
  default: DEFAULT_PAGE_LIMIT,
  description: `Maximum number of items to return (1–${MAX_PAGE_LIMIT}, default ${DEFAULT_PAGE_LIMIT})`
} as const

const cursorSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 100,
  description: 'Opaque position after which the page starts, taken from the `Link: rel="next"` header of the previous page'
} as const

export const petListQuerySchema = {
  $id: 'PetListQuery',
  type: 'object',
  description: 'Query parameters of `GET /pets`; each may appear at most once',
  properties: {
    limit: limitSchema,
    status: { type: 'string', enum: PET_STATUSES, description: 'Only animals with this availability status' },
    cursor: cursorSchema
  }
} as const

export const orderListQuerySchema = {
  $id: 'OrderListQuery',
  type: 'object',
  description: 'Query parameters of `GET /store/orders`; each may appear at most once',
  properties: {
    limit: limitSchema,
    cursor: cursorSchema
  }
} as const

export const petIdParamsSchema = {
  $id: 'PetIdParams',
  type: 'object',
  required: ['petId'],
  properties: {
    petId: { ...idSchema, format: 'int64', description: 'Identifier of the animal' }
  }
} as const

export interface ErrorBody {
  code: string
  message: string
  status: number
}

export const errorBodySchema = {
  $id: 'Error',
  type: 'object',
  required: ['code', 'message', 'status'],
  additionalProperties: false,
  properties: {
    code: { type: 'string', description: 'Machine-readable error code' },
    message: { type: 'string', description: 'Human-readable description' },
    status: { type: 'integer', description: 'The HTTP status code' }
  }
} as const

/** Every resource and parameter schema above, in an order where each one's references come before it. */
export const interfaceSchemas = [
  petStatusSchema,
  newPetSchema,
  petSchema,
  petsSchema,
  orderSchema,
  ordersSchema,
  petListQuerySchema,
  orderListQuerySchema,
  petIdParamsSchema
] as const

export interface NewPet {
  name: string
  categoryId: number
  status: PetStatus
}

export interface Pet extends NewPet {
  id: number
}

export interface Order {
  id: number
  petId: number
  quantity: number
  status: OrderStatus
}
