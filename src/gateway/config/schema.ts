// JSON Schemas of plans.yaml, keys.yaml and routes.yaml. Shape only; rules that span entries
// (unknown plan, duplicates, enterprise limits) are checked by the loader after these pass.
/** RFC 3339 timestamp, or a date alone (00:00 UTC). */
const isoDate = '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?(Z|[+-]\\d{2}:\\d{2}))?$'

const limits = {
  type: 'object',
  additionalProperties: false,
  required: ['perMinute', 'perDay'],
  properties: {
    perMinute: { type: 'integer', minimum: 1, maximum: 1_000_000_000 },
    perDay: { type: 'integer', minimum: 1, maximum: 1_000_000_000_000 }
  }
} as const

const planEntry = {
  type: 'object',
  additionalProperties: false,
  properties: {
    perMinute: limits.properties.perMinute,
    perDay: limits.properties.perDay,
    custom: { const: true }
  }
} as const

export const plansFileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['plans', 'anonymous'],
  properties: {
    plans: {
      type: 'object',
      minProperties: 1,
      propertyNames: { pattern: '^[a-z][a-z0-9_-]{0,31}$' },
      additionalProperties: planEntry
    },
    // ipv6Prefix: IPv6 clients are counted per prefix of this length (edge/client-address.ts).
    anonymous: { ...limits, properties: { ...limits.properties, ipv6Prefix: { type: 'integer', minimum: 32, maximum: 128 } } },
    ban: {
      type: 'object',
      additionalProperties: false,
      properties: {
        threshold: { type: 'integer', minimum: 1 },
        windowSeconds: { type: 'integer', minimum: 1 },
        durationSeconds: { type: 'integer', minimum: 1 },
        maxDurationSeconds: { type: 'integer', minimum: 1 }
      }
    }
  }
} as const

export const keysFileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['keys'],
  properties: {
    keys: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'sha256', 'plan'],
        properties: {
          id: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' },
          sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
          consumer: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' },
          plan: { type: 'string' },
          limits,
          disabled: { type: 'boolean' },
          expiresAt: { type: 'string', pattern: isoDate },
          scopes: { type: 'array', minItems: 1, uniqueItems: true, items: { enum: ['read', 'write'] } }
        }
      }
    }
  }
} as const

export const routesFileSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['routes'],
  properties: {
    routes: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['method', 'path'],
        properties: {
          method: { enum: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] },
          path: { type: 'string', pattern: '^/v1/[A-Za-z0-9/:._-]*$' },
          deprecated: {
            type: 'object',
            additionalProperties: false,
            required: ['since', 'sunset'],
            properties: {
              since: { type: 'string', pattern: isoDate },
              sunset: { type: 'string', pattern: isoDate },
              successor: { type: 'string', pattern: '^/' }
            }
          },
          stability: { enum: ['experimental', 'beta'] }
        }
      }
    }
  }
} as const
