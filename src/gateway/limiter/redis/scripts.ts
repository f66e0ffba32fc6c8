// The Redis path's two scripts and what their arguments and replies mean in TypeScript, so the
// store, the recovery and the simulator build and read them one way. Each script is one
// self-contained file with its KEYS/ARGV/reply header (lua/grant.lua, lua/epoch.lua);
// test/gateway/limiter/redis-gateway.test.ts pins their SHAs, so a changed script is a reviewed change.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { BanPolicy } from '../../config/types.js'
import type { Script } from './port.js'

function load (name: string): Script {
  const lua = readFileSync(new URL(`../lua/${name}.lua`, import.meta.url), 'utf8')
  return { name, lua, sha: createHash('sha1').update(lua).digest('hex') }
}

export const GRANT = load('grant')
export const EPOCH = load('epoch')

/** Fields of one grant entry's reply, after the call's leading Redis time. */
const GRANT_REPLY_FIELDS = 17

/**
 * One adjustment: add `delta` (negative: give back) to these buckets; 0 skips a window. `allowance`: an
 * outage-allowance admission written back (it does not come out of the caller's reserve).
 */
export interface Adjustment { readonly minute: number, readonly day: number, readonly month: number, readonly delta: number, readonly allowance?: boolean }

/**
 * One entry of a grant call: one id's `requests` of one `cost`, `extra` units wanted beyond them,
 * the `reserve` wanted, and what to settle first. `monthLimit` 0: none; `monthSoft`: the month is
 * counted but never refuses (overage allowed, or a quota only rehearsed); `write` false: a read.
 */
export interface GrantEntry {
  readonly key: string
  readonly minuteLimit: number, readonly dayLimit: number, readonly monthLimit: number, readonly monthSoft: boolean
  readonly requests: number, readonly cost: number, readonly extra: number, readonly reserve: number, readonly write: boolean
  readonly blocksBucket: number, readonly blocks: number // blocks the caller still holds in that minute bucket (0 once given back)
  readonly ban: BanPolicy | null
  readonly adjustments: readonly Adjustment[]
}

/** A window in a reply: units counted, when it next frees capacity, when it has room (0: not rejected). */
export interface WindowReply { readonly used: number, readonly resetAt: number, readonly retryAt: number }

/**
 * One entry's reply: `bannedAt` the rejected request (1-based) that started a ban (0: none),
 * `reserve` the caller's now, `held` every process's reserve (kept back in every window),
 * `bannedUntil` the ban's end (0: none), `pooled` the units other processes hold as blocks: granted in this second, or in the last one and not given back yet.
 */
export interface GrantReply {
  readonly outcome: 'ok' | 'rate_limited' | 'key_banned'
  readonly admitted: number, readonly bannedAt: number, readonly extra: number, readonly reserve: number, readonly held: number
  readonly minute: WindowReply, readonly day: WindowReply, readonly month: WindowReply
  readonly bannedUntil: number, readonly pooled: number
}

/** KEYS of a grant call: two per entry, the id's hash and its day ring's. */
export function grantKeys (entries: readonly GrantEntry[]): string[] {
  return entries.flatMap((e) => [e.key, e.key + ':d'])
}

/** ARGV of a grant call: the holder, then three per entry. */
export function grantArgs (holder: string, entries: readonly GrantEntry[]): string[] {
  const args = new Array<string>(1 + entries.length * 3)
  args[0] = holder
  let k = 1
  for (const e of entries) {
    args[k++] = `${e.minuteLimit} ${e.dayLimit} ${e.monthLimit} ${e.requests} ${e.cost} ${e.extra} ${e.reserve} ${e.write ? 1 : 0} ${e.monthSoft ? 1 : 0} ${e.blocksBucket} ${e.blocks}`
    args[k++] = e.ban === null ? '' : `${e.ban.threshold},${e.ban.windowSeconds * 1000},${e.ban.durationSeconds * 1000},${e.ban.maxDurationSeconds * 1000}`
    args[k++] = e.adjustments.length === 0 ? '' : e.adjustments.map((a) => `${a.minute},${a.day},${a.month},${a.delta}`).join(';')
  }
  return args
}

const OUTCOMES = ['ok', 'rate_limited', 'key_banned'] as const

/** A grant call's reply: Redis time (Unix ms) and one reply per entry. */
export function readGrantReply (raw: unknown, entries: number): { now: number, replies: GrantReply[] } {
  const r = raw as number[]
  if (!Array.isArray(r) || r.length !== 1 + entries * GRANT_REPLY_FIELDS) throw new Error('grant: unexpected reply')
  const replies: GrantReply[] = []
  const w = (k: number): WindowReply => ({ used: r[k]!, resetAt: r[k + 1]!, retryAt: r[k + 2]! })
  for (let i = 0, k = 1; i < entries; i++, k += GRANT_REPLY_FIELDS) {
    replies.push({ outcome: OUTCOMES[r[k]!] ?? 'rate_limited', admitted: r[k + 1]!, bannedAt: r[k + 2]!, extra: r[k + 3]!, reserve: r[k + 4]!, held: r[k + 5]!, minute: w(k + 6), day: w(k + 9), month: w(k + 12), bannedUntil: r[k + 15]!, pooled: r[k + 16]! })
  }
  return { now: r[0]!, replies }
}
