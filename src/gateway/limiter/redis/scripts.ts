// The Redis path's two scripts and what their arguments and replies mean in TypeScript, so the
// store, the recovery and the simulator build and read them one way. Each script is one
// self-contained file with its KEYS/ARGV/reply header (lua/grant.lua, lua/epoch.lua);
// test/gateway/limiter/redis/scripts.test.ts pins their SHAs, so a changed script is a reviewed change.
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
export const GRANT_REPLY_FIELDS = 16

/** One adjustment: add `delta` (negative: give back) to these buckets; 0 skips a window. */
export interface Adjustment {
  readonly minute: number
  readonly day: number
  readonly month: number
  readonly delta: number
}

/** One entry of a grant call: one id's requests of one cost, and what to settle first. */
export interface GrantEntry {
  readonly key: string
  readonly minuteLimit: number
  readonly dayLimit: number
  /** 0: no month limit. */
  readonly monthLimit: number
  /** The month is counted but never refuses (overage allowed, or a quota only rehearsed). */
  readonly monthSoft: boolean
  readonly requests: number
  readonly cost: number
  readonly extra: number
  readonly reserve: number
  readonly write: boolean
  readonly ban: BanPolicy | null
  readonly adjustments: readonly Adjustment[]
}

export interface WindowReply {
  /** Units counted in the window. */
  readonly used: number
  readonly resetAt: number
  readonly retryAt: number
}

export interface GrantReply {
  readonly outcome: 'ok' | 'rate_limited' | 'key_banned'
  readonly admitted: number
  /** The rejected request (1-based) that started a ban; 0: none. */
  readonly bannedAt: number
  readonly extra: number
  /** The caller's reserve now (kept back for it). */
  readonly reserve: number
  /** Units kept back in every window: every process's reserve. */
  readonly held: number
  readonly minute: WindowReply
  readonly day: WindowReply
  readonly month: WindowReply
  /** Unix ms the ban ends (0: none). */
  readonly bannedUntil: number
}

const policyArgs = new WeakMap<BanPolicy, string>()
/** The script's ban argument, built once per policy object. */
export function banArg (ban: BanPolicy | null): string {
  if (ban === null) return ''
  let arg = policyArgs.get(ban)
  if (arg === undefined) {
    arg = `${ban.threshold},${ban.windowSeconds * 1000},${ban.durationSeconds * 1000},${ban.maxDurationSeconds * 1000}`
    policyArgs.set(ban, arg)
  }
  return arg
}

/** KEYS of a grant call: two per entry, the id's hash and its day ring's. */
export function grantKeys (entries: readonly GrantEntry[]): string[] {
  const keys = new Array<string>(entries.length * 2)
  entries.forEach((e, i) => {
    keys[2 * i] = e.key
    keys[2 * i + 1] = e.key + ':d'
  })
  return keys
}

/** ARGV of a grant call: the holder, then three per entry. */
export function grantArgs (holder: string, entries: readonly GrantEntry[]): string[] {
  const args = new Array<string>(1 + entries.length * 3)
  args[0] = holder
  let k = 1
  for (const e of entries) {
    args[k++] = `${e.minuteLimit} ${e.dayLimit} ${e.monthLimit} ${e.requests} ${e.cost} ${e.extra} ${e.reserve} ${e.write ? 1 : 0} ${e.monthSoft ? 1 : 0}`
    args[k++] = banArg(e.ban)
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
  for (let i = 0, k = 1; i < entries; i++, k += GRANT_REPLY_FIELDS) {
    replies.push({
      outcome: OUTCOMES[r[k]!] ?? 'rate_limited',
      admitted: r[k + 1]!,
      bannedAt: r[k + 2]!,
      extra: r[k + 3]!,
      reserve: r[k + 4]!,
      held: r[k + 5]!,
      minute: { used: r[k + 6]!, resetAt: r[k + 7]!, retryAt: r[k + 8]! },
      day: { used: r[k + 9]!, resetAt: r[k + 10]!, retryAt: r[k + 11]! },
      month: { used: r[k + 12]!, resetAt: r[k + 13]!, retryAt: r[k + 14]! },
      bannedUntil: r[k + 15]!
    })
  }
  return { now: r[0]!, replies }
}

/** The epoch mark: its value, when it was set and Redis's time, Unix ms. */
export function readEpochReply (raw: unknown): { value: string, at: number, now: number } {
  const r = raw as [string, number, number]
  return { value: String(r[0]), at: Number(r[1]), now: Number(r[2]) }
}
