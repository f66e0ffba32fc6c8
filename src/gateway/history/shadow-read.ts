// The admin API's read of a plan's shadow records in Redis, bounded whatever the number of consumers
// in them, because it runs on the Redis the limiter decides on: per hour, one ZRANGE of the hour's
// heaviest (at most `keep` members, the bound written in the command itself) — one hour at a time,
// so a limiter call never waits behind more than one such command — and the hours' totals in one
// pipeline of HMGETs; the counts are summed here (shadow-top.ts); then admitted / first / last of the
// `top` consumers only (ZMSCORE, at most `top` members each). No ZUNION, no KEYS, no SCAN. The number
// of consumers is the union of what was read when no hour dropped any, else PFCOUNT over the hours'
// HyperLogLogs (an estimate, ±0.81 %). Hours written by a version without totals (before the records
// were bounded; gone 26 h after an upgrade) count what their heaviest `keep` hold.
import type { Cluster, Redis } from 'ioredis'
import { shadowKey, type ShadowPart } from '../redis/keys.js'
import { sumHours, topOf } from './shadow-top.js'
import type { ShadowRecord, ShadowSummary } from './store.js'

type Client = Redis | Cluster
type Replies = Array<[Error | null, unknown]> | null

/** Each reply of a pipeline, or the first error in it. */
function values (replies: Replies): unknown[] {
  if (replies === null) throw new Error('shadow records read: not sent')
  return replies.map(([err, value]) => {
    if (err !== null) throw err
    return value
  })
}

/** [member, score, member, score, …] → member → score */
function pairs (reply: readonly string[]): Map<string, number> {
  const map = new Map<string, number>()
  for (let i = 0; i + 1 < reply.length; i += 2) map.set(reply[i] ?? '', Number(reply[i + 1]))
  return map
}

interface HourTotals { rejections: number, untracked: number, dropped: number, known: boolean }

async function totalsOf (client: Client, keys: (part: ShadowPart) => string[]): Promise<HourTotals[]> {
  const replies = values(await client.pipeline(keys('t').map((key) => ['hmget', key, 'r', 'u', 'e'])).exec())
  return replies.map((reply) => {
    const [r, u, e] = reply as Array<string | null>
    return { rejections: Number(r ?? 0), untracked: Number(u ?? 0), dropped: Number(e ?? 0), known: r !== null }
  })
}

/** admitted / first / last of `ids`, summed over the hours they are in. */
async function detailsOf (client: Client, keys: (part: ShadowPart) => string[], hours: ReadonlyArray<ReadonlyMap<string, number>>, ids: readonly string[]): Promise<Map<string, Omit<ShadowRecord, 'consumerId' | 'rejections'>>> {
  const details = new Map(ids.map((id) => [id, { admitted: 0, first: Number.POSITIVE_INFINITY, last: 0 }]))
  const [a, f, l] = [keys('a'), keys('f'), keys('l')]
  for (const [i, hour] of hours.entries()) {
    const present = ids.filter((id) => hour.has(id))
    if (present.length === 0) continue
    const [admitted, first, last] = values(await client.pipeline()
      .zmscore(a[i] ?? '', ...present).zmscore(f[i] ?? '', ...present).zmscore(l[i] ?? '', ...present).exec()) as Array<Array<string | null>>
    present.forEach((id, k) => {
      const d = details.get(id)
      if (d === undefined) return
      d.admitted += Number(admitted?.[k] ?? 0)
      const at = first?.[k]
      if (at !== null && at !== undefined) d.first = Math.min(d.first, Number(at))
      d.last = Math.max(d.last, Number(last?.[k] ?? 0))
    })
  }
  return details
}

/** `plan`'s records over `hours`: totals, and the `top` heaviest consumers with their details. */
export async function readShadow (client: Client, plan: string, hours: readonly number[], top: number, keep: number): Promise<ShadowSummary> {
  const keys = (part: ShadowPart): string[] => hours.map((hour) => shadowKey(plan, hour, part))
  const totals = await totalsOf(client, keys)
  const ranked: Array<Map<string, number>> = []
  for (const key of keys('n')) ranked.push(pairs(await client.zrange(key, 0, keep - 1, 'REV', 'WITHSCORES')))

  let rejections = 0
  let untracked = 0
  let complete = true
  totals.forEach((t, i) => {
    const listed = ranked[i] ?? new Map<string, number>()
    if (t.known) {
      rejections += t.rejections
      untracked += t.untracked
      if (t.dropped > 0) complete = false
    } else {
      // Written before the records had totals: what the heaviest `keep` hold, maybe not all of it.
      for (const n of listed.values()) rejections += n
      if (listed.size >= keep) complete = false
    }
  })
  const summed = sumHours(ranked)
  const estimated = complete ? summed.size : Number(await client.pfcount(...keys('h')))
  const heaviest = topOf(summed, top)
  const details = await detailsOf(client, keys, ranked, heaviest.map(([id]) => id))
  return {
    consumers: Math.max(summed.size, estimated),
    rejections,
    complete,
    untracked,
    top: heaviest.map(([consumerId, n]) => {
      const d = details.get(consumerId)
      return { consumerId, rejections: n, admitted: d?.admitted ?? 0, first: Number.isFinite(d?.first) ? d?.first ?? 0 : 0, last: d?.last ?? 0 }
    })
  }
}
