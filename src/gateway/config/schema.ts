// JSON Schemas of plans.yaml, keys.yaml and routes.yaml. Shape and bounds only; rules that span
// fields or entries (perDay ≥ perMinute, shadow below enforced, unknown plan, duplicates, enterprise limits) are checked by
// the loader after these pass. Every number has a bound that both the Redis script and the
// in-process store carry exactly (docs/decisions.md §8 gives the reasons): a value outside it would
// reach the arithmetic as something it cannot read (the script parses the ban policy as digits; a
// number JavaScript prints in exponent form is not digits) or would make the two stores disagree.
/** RFC 3339 timestamp, or a date alone (00:00 UTC). */
const isoDate = '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?(Z|[+-]\\d{2}:\\d{2}))?$'

/** Requests per rolling minute: the in-process store counts a 1 s bucket in 32 bits. */
export const MAX_PER_MINUTE = 1_000_000_000
/** Requests per rolling day: exact as a double (Lua and JavaScript) and written by JavaScript as plain digits. */
export const MAX_PER_DAY = 1_000_000_000_000
/** Units per calendar month: exact as a double in Lua and JavaScript, written by JavaScript as plain digits. */
export const MAX_PER_MONTH = 10_000_000_000_000
/** Units one request of a route may cost. */
export const MAX_COST = 1_000_000
/** 429s within the ban window before a ban: each consumer keeps a ring of this many + 1 timestamps. */
export const MAX_BAN_THRESHOLD = 1_000_000
/**
 * Ban window, duration and cap, in seconds: at most a day. The in-process store forgets a consumer
 * idle for two days (the longest ban plus its escalation memory of a day), so a longer ban would end
 * early there while Redis kept it.
 */
export const MAX_BAN_SECONDS = 86_400

const limits = {
  type: 'object',
  additionalProperties: false,
  required: ['perMinute', 'perDay'],
  properties: {
    perMinute: { type: 'integer', minimum: 1, maximum: MAX_PER_MINUTE },
    perDay: { type: 'integer', minimum: 1, maximum: MAX_PER_DAY }
  }
} as const

/**
 * Limits being rehearsed (`shadow`), beside a plan's or a key's enforced ones: the same bounds; that
 * at least one window is given and each is below its enforced limit is the loader's rule (limits.ts).
 */
const shadow = {
  type: 'object',
  additionalProperties: false,
  properties: {
    perMinute: limits.properties.perMinute,
    perDay: limits.properties.perDay,
    perMonth: { type: 'integer', minimum: 1, maximum: MAX_PER_MONTH },
    announce: { type: 'boolean' }
  }
} as const

/** A key's own limits, which may carry a month quota and a shadow. */
const keyLimits = { ...limits, properties: { ...limits.properties, perMonth: shadow.properties.perMonth, shadow } } as const

const banSeconds = { type: 'integer', minimum: 1, maximum: MAX_BAN_SECONDS } as const

/** One entry of `plans`: fixed limits, or `custom: true` (limits from each key). */
export const planEntrySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    perMinute: limits.properties.perMinute,
    perDay: limits.properties.perDay,
    perMonth: shadow.properties.perMonth,
    // Past perMonth: `allow` admits and counts the overage (billed), `block` answers quota_exceeded.
    overage: { enum: ['allow', 'block'] },
    custom: { const: true },
    shadow
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
      additionalProperties: planEntrySchema
    },
    // ipv6Prefix: IPv6 clients are counted per prefix of this length (edge/client-address.ts).
    anonymous: { ...limits, properties: { ...limits.properties, ipv6Prefix: { type: 'integer', minimum: 32, maximum: 128 } } },
    ban: {
      type: 'object',
      additionalProperties: false,
      properties: {
        threshold: { type: 'integer', minimum: 1, maximum: MAX_BAN_THRESHOLD },
        windowSeconds: banSeconds,
        durationSeconds: banSeconds,
        maxDurationSeconds: banSeconds
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
          limits: keyLimits,
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
          stability: { enum: ['experimental', 'beta'] },
          cost: { type: 'integer', minimum: 1, maximum: MAX_COST }
        }
      }
    }
  }
} as const
