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
/** Maintenance, not the request path: a day hash without an expiry given its limiter hash's (day-expiry-sweep.ts). */
export const DAY_EXPIRY = load('day-expiry')

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
  /**
   * The minute bucket since which these requests ask again: their first refusal, a provisional one (they wait for blocks
   * held elsewhere: calls.ts waitsForBlocks), or the reply that admitted them too late to spend; 0 or absent: asked for
   * the first time. Such an entry is decided by its windows even under a ban
   * that started since, and its refusals count toward a ban only once final (grant.lua).
   */
  readonly waited?: number
  readonly ban: BanPolicy | null
  readonly adjustments: readonly Adjustment[]
}

/** A window in a reply: units counted, when it next frees capacity, when it has room (0: not rejected). */
export interface WindowReply { readonly used: number, readonly resetAt: number, readonly retryAt: number }

/**
 * One entry's reply: `bannedAt` the rejected request (1-based) that started a ban (0: none),
 * `reserve` the caller's now, `held` every process's reserve (kept back in every window),
 * `bannedUntil` the ban's end (0: none), `pooled` the units other processes hold as blocks: granted in the last BLOCK_HELD_BUCKETS seconds (layout.ts) and not given back yet.
 */
export interface GrantReply {
  readonly outcome: 'ok' | 'rate_limited' | 'key_banned'
  readonly admitted: number, readonly bannedAt: number, readonly extra: number, readonly reserve: number, readonly held: number
  readonly minute: WindowReply, readonly day: WindowReply, readonly month: WindowReply
  readonly bannedUntil: number, readonly pooled: number
}

/** KEYS of a grant call: two per entry, the id's hash and its day ring's. */
export function grantKeys (entries: readonly GrantEntry[]): string[] {
  const keys = new Array<string>(entries.length * 2)
  let position = 0
  for (const entry of entries) {
    keys[position++] = entry.key
    keys[position++] = entry.key + ':d'
  }
  return keys
}

/** The ban policy as an entry's second ARGV carries it ('' : none). */
function banArg (ban: BanPolicy | null): string {
  return ban === null ? '' : `${ban.threshold},${ban.windowSeconds * 1000},${ban.durationSeconds * 1000},${ban.maxDurationSeconds * 1000}`
}

/**
 * ARGV of a grant call: the holder, then three per entry. The entries of a call mostly share one ban policy (the
 * config's): its text is made once per run of entries with the same policy, not once per entry.
 */
export function grantArgs (holder: string, entries: readonly GrantEntry[]): string[] {
  const args = new Array<string>(1 + entries.length * 3)
  args[0] = holder
  let position = 1
  let lastBan: BanPolicy | null = null
  let lastBanArg = ''
  for (const entry of entries) {
    if (entry.ban !== lastBan) {
      lastBan = entry.ban
      lastBanArg = banArg(entry.ban)
    }
    args[position++] = `${entry.minuteLimit} ${entry.dayLimit} ${entry.monthLimit} ${entry.requests} ${entry.cost} ${entry.extra} ${entry.reserve} ${entry.write ? 1 : 0} ${entry.monthSoft ? 1 : 0} ${entry.blocksBucket} ${entry.blocks} ${entry.waited ?? 0}`
    args[position++] = lastBanArg
    args[position++] = entry.adjustments.length === 0 ? '' : entry.adjustments.map((adjustment) => `${adjustment.minute},${adjustment.day},${adjustment.month},${adjustment.delta}${adjustment.allowance === true ? 'a' : ''}`).join(';')
  }
  return args
}

const OUTCOMES = ['ok', 'rate_limited', 'key_banned'] as const

/** A grant call's reply: Redis time (Unix ms) and one reply per entry. */
export function readGrantReply (raw: unknown, entries: number): { now: number, replies: GrantReply[] } {
  const fields = raw as number[]
  if (!Array.isArray(fields) || fields.length !== 1 + entries * GRANT_REPLY_FIELDS) throw new Error('grant: unexpected reply')
  const replies: GrantReply[] = []
  const windowAt = (at: number): WindowReply => ({ used: fields[at]!, resetAt: fields[at + 1]!, retryAt: fields[at + 2]! })
  for (let index = 0, at = 1; index < entries; index++, at += GRANT_REPLY_FIELDS) {
    replies.push({ outcome: OUTCOMES[fields[at]!] ?? 'rate_limited', admitted: fields[at + 1]!, bannedAt: fields[at + 2]!, extra: fields[at + 3]!, reserve: fields[at + 4]!, held: fields[at + 5]!, minute: windowAt(at + 6), day: windowAt(at + 9), month: windowAt(at + 12), bannedUntil: fields[at + 15]!, pooled: fields[at + 16]! })
  }
  return { now: fields[0]!, replies }
}
