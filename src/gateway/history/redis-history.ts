// The history in Redis, written by every gateway process (each adds its own counts) and read by any
// one. Nothing here is on the hot path: a flush sends one pipeline (one per Cluster node) of plain
// increments and shadow-script calls, on a connection of its own so it never queues behind or ahead
// of the decisions; reads go to a second connection of the history's (with a command timeout) when
// one is given, so a read never waits behind a flush either.
//
// Usage: one small hash per consumer and month, `rl:{consumer}:u:YYYYMM`, a few fields per day and
// one for the month (usage-hash.ts) — under the consumer's hash tag, beside its windows (one Cluster
// slot), and expiring USAGE_KEY_KEEP_DAYS after the month ends, so every day of the last
// USAGE_HISTORY_DAYS, and every day of a month still shown, is always there. HINCRBY from any number
// of processes adds up.
//
// Shadow records: per plan and UTC hour, under the plan's own tag `rl:{shadow:<plan>}:<hour>:`, the
// hour's heaviest consumers (at most SHADOW_KEEP_PER_HOUR) in four sorted sets, its totals and a
// HyperLogLog of every consumer, written by one script (shadow-script.ts) that keeps them bounded as
// it writes; read by shadow-read.ts, bounded too. They expire SHADOW_KEY_KEEP_HOURS after their
// hour. A consumer id cannot contain `:`, so no consumer's tag is ever `shadow:…`.
import calculateSlot from 'cluster-key-slot'
import { Cluster, type ChainableCommander, type Redis } from 'ioredis'
import { waitReady } from '../redis/connection.js'
import { shadowKey, usageKey, type ShadowPart } from '../redis/keys.js'
import { DAY_MS, daysOfMonth, HOUR_MS, monthOf } from './days.js'
import { settlesWithin, within } from './deadline.js'
import { readShadow } from './shadow-read.js'
import { defineShadowScript, SHADOW_CELLS_PER_CALL } from './shadow-script.js'
import { daysFrom, SHADOW_KEEP_PER_HOUR, SHADOW_WINDOW_HOURS, USAGE_KEY_KEEP_DAYS, type HistoryStore } from './store.js'
import { mergeBatches, type MonthCell, type ShadowCell, type UsageCell } from './tally.js'
import { dayCounts, dayField, MONTH_UNITS_FIELD, monthTotals, usageFields } from './usage-hash.js'

/** An hour's shadow sets live this many hours past the hour's end. */
export const SHADOW_KEY_KEEP_HOURS = SHADOW_WINDOW_HOURS + 2
export const DEFAULT_READ_WAIT_MS = 2_000

export { shadowKey, usageKey, USAGE_KEY_KEEP_DAYS, type ShadowPart }

/** One command of a flush: the key it writes (for a Cluster's grouping), what to send again if it fails, and what to do with its reply. */
interface Command {
  readonly key: string
  readonly send: (pipeline: ChainableCommander) => void
  readonly failed: () => void
  readonly done?: (reply: unknown) => void
}

export interface RedisHistoryOptions {
  /** A read (and the close) that Redis does not answer within this fails (the admin API: 503). */
  readWaitMs?: number
  /** The connection reads go to (closed with the history); default `client`. */
  reader?: Redis | Cluster
  /** Consumers a plan's shadow records keep per hour (default SHADOW_KEEP_PER_HOUR). */
  keepPerHour?: number
}

/** `client`: a connection of the history's own (closed with it), where flushes are written. */
export function createRedisHistory (client: Redis | Cluster, opts: RedisHistoryOptions = {}): HistoryStore {
  const readWaitMs = opts.readWaitMs ?? DEFAULT_READ_WAIT_MS
  const reader = opts.reader ?? client
  const keep = opts.keepPerHour ?? SHADOW_KEEP_PER_HOUR
  const cluster = client instanceof Cluster ? client : undefined
  defineShadowScript(client)

  /** Commands of one pipeline: a Cluster takes a pipeline's keys only from the slots of one node. */
  function groupOf (key: string): string {
    if (cluster === undefined) return ''
    const slot = calculateSlot(key)
    return cluster.slots[slot]?.join(',') ?? `slot ${slot}`
  }

  /**
   * Keys this process has given their expiry (Unix s): a key's expiry is fixed by its month or hour,
   * so it is sent once per key and process, not with every flush (on a plan's hour, once for all its
   * consumers). Forgotten once past, when the command failed (sent again with the retry), and on
   * every (re)connection.
   */
  const expiring = new Map<string, number>()

  function expireOnce (commands: Command[], key: string, expireAt: number, retry: () => void): void {
    if (expiring.get(key) === expireAt) return
    expiring.set(key, expireAt)
    commands.push({ key, send: (p) => p.expireat(key, expireAt), failed: () => { expiring.delete(key); retry() } })
  }

  // A Redis that comes back may have come back empty (no persistence, a failover to a lagging
  // replica): keys made again by HINCRBY would have no expiry, so every one is sent again.
  client.on('ready', () => { expiring.clear() })

  function forgetPastExpiries (): void {
    const now = Date.now() / 1000
    for (const [key, at] of expiring) if (at < now) expiring.delete(key)
  }

  const usageExpiry = (nextMonth: number): number => (nextMonth + USAGE_KEY_KEEP_DAYS) * DAY_MS / 1000

  /** One HINCRBY per count of the cell that is not 0; one that fails comes back as a cell holding that count only. */
  function usageCommands (cell: UsageCell, retry: UsageCell[]): Command[] {
    const { month, dayOfMonth, nextMonth } = monthOf(cell.day)
    const key = usageKey(cell.consumerId, month)
    const commands: Command[] = []
    for (const { field, n, alone } of usageFields(cell, dayOfMonth)) {
      commands.push({ key, send: (p) => p.hincrby(key, field, n), failed: () => retry.push(alone()) })
    }
    expireOnce(commands, key, usageExpiry(nextMonth), () => retry.push({ ...cell, admitted: 0, units: 0, rejected: 0, overage: 0 }))
    return commands
  }

  /** The month's units of a consumer with a quota (`u`), its total after the HINCRBY told to `onMonth`. */
  function monthCommands (cell: MonthCell, retry: MonthCell[], onMonth: ((cell: MonthCell, units: number) => void) | undefined): Command[] {
    const key = usageKey(cell.consumerId, cell.month)
    const commands: Command[] = [{
      key,
      send: (p) => p.hincrby(key, MONTH_UNITS_FIELD, cell.units),
      failed: () => retry.push(cell),
      done: (reply) => { onMonth?.(cell, Number(reply)) }
    }]
    expireOnce(commands, key, usageExpiry(daysOfMonth(cell.month).next), () => retry.push({ ...cell, units: 0 }))
    return commands
  }

  /** One script call per plan, hour and SHADOW_CELLS_PER_CALL cells; a call that fails sends its cells again. */
  function shadowCommands (cells: readonly ShadowCell[], retry: ShadowCell[]): Command[] {
    const byHour = new Map<string, ShadowCell[]>()
    for (const cell of cells) {
      const id = `${cell.plan}\n${cell.hour}`
      const list = byHour.get(id)
      if (list === undefined) byHour.set(id, [cell])
      else list.push(cell)
    }
    const commands: Command[] = []
    for (const hourCells of byHour.values()) {
      const { plan, hour } = hourCells[0]!
      const [n, a, f, l, t, h] = (['n', 'a', 'f', 'l', 't', 'h'] as const).map((part) => shadowKey(plan, hour, part)) as [string, string, string, string, string, string]
      const expireAt = ((hour + 1) * HOUR_MS) / 1000 + SHADOW_KEY_KEEP_HOURS * 3600
      for (let from = 0; from < hourCells.length; from += SHADOW_CELLS_PER_CALL) {
        const chunk = hourCells.slice(from, from + SHADOW_CELLS_PER_CALL)
        const args: Array<string | number> = [keep, expireAt]
        for (const c of chunk) args.push(c.consumerId, c.rejections, c.admitted, c.first, c.last)
        commands.push({ key: n, send: (p) => p.petstoreShadowAdd(n, a, f, l, t, h, ...args), failed: () => retry.push(...chunk) })
      }
    }
    return commands
  }

  async function send (commands: readonly Command[]): Promise<void> {
    const groups = new Map<string, Command[]>()
    for (const command of commands) {
      const group = groupOf(command.key)
      const list = groups.get(group)
      if (list === undefined) groups.set(group, [command])
      else list.push(command)
    }
    await Promise.all([...groups.values()].map(async (group) => {
      const pipeline = client.pipeline()
      for (const command of group) command.send(pipeline)
      let replies: Array<[Error | null, unknown]> | null
      try {
        replies = await pipeline.exec()
      } catch {
        replies = null // not sent at all (no connection): every command goes again
      }
      group.forEach((command, i) => {
        const reply = replies?.[i]
        if (reply === undefined || reply[0] !== null) command.failed()
        else command.done?.(reply[1])
      })
    }))
  }

  /** The usage hashes of `months` (an empty one for a month without any). */
  async function readMonths (consumerId: string, months: readonly string[]): Promise<Map<string, Record<string, string>>> {
    const read = Promise.all(months.map(async (month) => [month, await reader.hgetall(usageKey(consumerId, month))] as const))
    return new Map(await within(read, readWaitMs, 'usage history read'))
  }

  /** A read on a connection still (re)connecting waits for it, as long as a read may take. */
  async function connected (what: string): Promise<void> {
    if (!await waitReady(reader, readWaitMs)) throw new Error(`${what}: not connected to Redis within ${readWaitMs} ms`)
  }

  return {
    scope: 'shared',
    async write (batch, onMonth) {
      forgetPastExpiries()
      const usage: UsageCell[] = []
      const shadow: ShadowCell[] = []
      const months: MonthCell[] = []
      const commands = [
        ...batch.usage.flatMap((cell) => usageCommands(cell, usage)),
        ...batch.months.flatMap((cell) => monthCommands(cell, months, onMonth)),
        ...shadowCommands(batch.shadow, shadow)
      ]
      if (commands.length > 0) await send(commands)
      // A usage cell's failed commands each came back: one cell per consumer and day again.
      return mergeBatches([{ usage, shadow, months }], { day: () => true, hour: () => true })
    },
    async usage (consumerId, fromDay, toDay) {
      await connected('usage history read')
      const months = [...new Set(daysFrom(fromDay, toDay, () => undefined).map((d) => monthOf(d.day).month))]
      const hashes = await readMonths(consumerId, months)
      return daysFrom(fromDay, toDay, (day) => {
        const { month, dayOfMonth } = monthOf(day)
        return dayCounts(hashes.get(month), dayField(dayOfMonth))
      })
    },
    async months (consumerId, months) {
      await connected('usage history read')
      const hashes = await readMonths(consumerId, months)
      return months.map((month) => ({ month, ...monthTotals(hashes.get(month) ?? {}) }))
    },
    async shadow (plan, fromHour, toHour, top) {
      await connected('shadow records read')
      const hours = Array.from({ length: toHour - fromHour + 1 }, (_, i) => fromHour + i)
      return await within(readShadow(reader, plan, hours, Math.min(top, keep), keep), readWaitMs, 'shadow records read')
    },
    async close () {
      // QUIT waits for the replies before it; a Redis that does not answer gets the connection dropped.
      const clients = reader === client ? [client] : [client, reader]
      await Promise.all(clients.map(async (c) => {
        await settlesWithin(c.quit(), readWaitMs)
        c.disconnect()
      }))
    }
  }
}
