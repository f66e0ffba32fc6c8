// The limiter's Lua scripts as the Redis store, its recovery calls (redis-recovery.ts) and the
// tests' Lua VM call them: one script per operation, each file documenting its own KEYS, ARGV and
// reply, put together at load time with the shared code it needs: lua/window.lua (rings),
// lua/return-unused.lua, lua/decision.lua (the decision, a function decide, decide batch and lease
// call), lua/add-at.lua. Loaded once per client (ioredis
// defineCommand: called by SHA, reloaded on NOSCRIPT). What the arguments and replies mean in
// TypeScript lives here too, so every caller of a script builds and reads it the same way.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Cluster, Redis, Result } from 'ioredis'
import type { BanPolicy } from '../../config/types.js'
import type { ConsumeOutcome, ConsumeResult } from '../store.js'
import type { Unused } from './lease-table.js'

export type ScriptArg = string | number
/** A decision's reply: outcome, now, minute count/reset/retry, day count/reset/retry, ban end, granted. */
export type DecisionReply = [number, number, number, number, number, number, number, number, number, number]

export interface LimiterScript {
  /** The ioredis command it is defined as. */
  readonly command: 'petstoreDecide' | 'petstoreDecideBatch' | 'petstorePeek' | 'petstoreLease' | 'petstoreGiveBack' |
  'petstoreWriteBack' | 'petstoreReseed' | 'petstoreHeartbeat' | 'petstoreEpoch'
  /** Keys per call; undefined: as many as the call carries (its first argument counts them). */
  readonly numberOfKeys: number | undefined
  /** The operation's own file between the shared ones it needs (lua/window.lua first; lua/return-unused.lua, lua/decision.lua, lua/add-at.lua). */
  readonly lua: string
  /** What Redis calls it (SHA-1 of `lua`). */
  readonly sha: string
}

function load (command: LimiterScript['command'], numberOfKeys: number | undefined, files: readonly string[]): LimiterScript {
  const lua = files.map((name) => readFileSync(new URL(`../lua/${name}`, import.meta.url), 'utf8')).join('\n')
  return { command, numberOfKeys, lua, sha: createHash('sha1').update(lua).digest('hex') }
}

export const SCRIPTS = {
  decide: load('petstoreDecide', 3, ['window.lua', 'decision.lua', 'decide.lua']),
  decideBatch: load('petstoreDecideBatch', undefined, ['window.lua', 'decision.lua', 'decide-batch.lua']),
  peek: load('petstorePeek', 2, ['window.lua', 'peek.lua']),
  lease: load('petstoreLease', 3, ['window.lua', 'return-unused.lua', 'decision.lua', 'lease.lua']),
  giveBack: load('petstoreGiveBack', 2, ['window.lua', 'return-unused.lua', 'give-back.lua']),
  writeBack: load('petstoreWriteBack', 2, ['window.lua', 'add-at.lua', 'write-back.lua']),
  reseed: load('petstoreReseed', 3, ['window.lua', 'add-at.lua', 'reseed.lua']),
  heartbeat: load('petstoreHeartbeat', 1, ['heartbeat.lua']),
  epoch: load('petstoreEpoch', 1, ['epoch.lua'])
} as const satisfies Record<string, LimiterScript>

declare module 'ioredis' {
  interface RedisCommander<Context> {
    petstoreDecide: (minute: string, day: string, ban: string, ...args: ScriptArg[]) => Result<DecisionReply, Context>
    /** `keys` keys (3 per decision), then 3 arguments per decision: see decide-batch.lua. */
    petstoreDecideBatch: (keys: number, ...keysThenArgs: ScriptArg[]) => Result<DecisionReply[], Context>
    petstorePeek: (minute: string, day: string, ...args: ScriptArg[]) => Result<DecisionReply, Context>
    petstoreLease: (minute: string, day: string, ban: string, ...args: ScriptArg[]) => Result<DecisionReply, Context>
    petstoreGiveBack: (minute: string, day: string, ...args: ScriptArg[]) => Result<number, Context>
    petstoreWriteBack: (minute: string, day: string, ...args: ScriptArg[]) => Result<[number, number], Context>
    petstoreReseed: (minute: string, day: string, ban: string, ...args: ScriptArg[]) => Result<number, Context>
    petstoreHeartbeat: (registry: string, ...args: ScriptArg[]) => Result<number, Context>
    petstoreEpoch: (marker: string, candidate: string) => Result<string, Context>
  }
}

/** Makes every script a command of `client`, sent by SHA. */
export function defineScripts (client: Redis | Cluster): void {
  for (const script of Object.values(SCRIPTS)) {
    client.defineCommand(script.command, script.numberOfKeys === undefined ? { lua: script.lua } : { numberOfKeys: script.numberOfKeys, lua: script.lua })
  }
}

export const KEY_PREFIX = 'rl:'

/** Every Redis key of one limiter id: one hash tag, one slot. */
export function redisKeys (id: string): [minute: string, day: string, ban: string] {
  const base = `${KEY_PREFIX}{${id}}:`
  return [`${base}m`, `${base}d`, `${base}b`]
}

/** The scripts' ban argument: '' (never banned) or 'threshold,windowMs,durationMs,maxMs', built once per policy object. */
const policyArgs = new WeakMap<BanPolicy, string>()
export function banArg (ban: BanPolicy | null): string {
  if (ban === null) return ''
  let arg = policyArgs.get(ban)
  if (arg === undefined) {
    arg = `${ban.threshold},${ban.windowSeconds * 1000},${ban.durationSeconds * 1000},${ban.maxDurationSeconds * 1000}`
    policyArgs.set(ban, arg)
  }
  return arg
}

/** lease.lua's ARGV after the limits and ban policy: block wanted, holder, and the unused admissions to hand back first. */
export function leaseArgs (want: number, holder: string, unused: Unused | undefined): [number, string, number, number, number] {
  return [want, holder, unused?.minuteBucket ?? 0, unused?.dayBucket ?? 0, unused?.count ?? 0]
}

const OUTCOMES: readonly ConsumeOutcome[] = ['ok', 'rate_limited', 'key_banned', 'ban_started']

export function toResult (reply: DecisionReply): ConsumeResult {
  return {
    outcome: OUTCOMES[reply[0]] ?? 'rate_limited',
    now: reply[1],
    minute: { count: reply[2], resetAt: reply[3], retryAt: reply[4] },
    day: { count: reply[5], resetAt: reply[6], retryAt: reply[7] },
    bannedUntil: reply[8]
  }
}
