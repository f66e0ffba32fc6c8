// Every Redis key the gateway writes, named in one place. A consumer's keys (its limiter state and
// its usage history) share one hash tag, `{consumer}`, so they live in one Cluster slot and one
// script can touch them together; shadow records share their plan's tag. A consumer id cannot
// contain `:` or `}` (config/schema.ts), so no consumer's tag is ever another's or `shadow:…`.

export const KEY_PREFIX = 'rl:'

/** The consumer's limiter state: `rl:{acme}` (its windows, ban and reserves: limiter/lua/grant.lua). */
export function limiterKey (id: string): string {
  return `${KEY_PREFIX}{${id}}`
}

/** The past buckets of the consumer's day window: `rl:{acme}:d`. */
export function dayKey (id: string): string {
  return `${KEY_PREFIX}{${id}}:d`
}

/** Usage history of one consumer and month (`YYYYMM`): `rl:{acme}:u:203001`. */
export function usageKey (consumerId: string, month: string): string {
  return `${KEY_PREFIX}{${consumerId}}:u:${month}`
}

/**
 * The parts of one plan's shadow records for one hour (history/shadow-script.ts writes them): `n`
 * rejections, `a` of those admitted, `f` / `l` first and last (sorted sets, the hour's heaviest
 * consumers only), `t` the hour's totals (hash), `h` every consumer of the hour (HyperLogLog).
 */
export type ShadowPart = 'n' | 'a' | 'f' | 'l' | 't' | 'h'

/** Shadow records of one plan and UTC hour: `rl:{shadow:free}:527040:n`. */
export function shadowKey (plan: string, hour: number, part: ShadowPart): string {
  return `${KEY_PREFIX}{shadow:${plan}}:${hour}:${part}`
}
