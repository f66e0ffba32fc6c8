// The `local` fallback's admissions that Redis may not have counted, per consumer, and their way
// back into Redis. Each admission is kept in the buckets it belongs to (minute and day bucket, by
// an upper bound of Redis time, so it never leaves a window early) until Redis is known to count
// it: either the request's own script ran late and admitted it (its late reply), or a write-back
// (write-back.lua) added it. A write-back carries this process's sequence number, which the script
// keeps beside the consumer's ring, so a retry of a write-back that was applied but whose answer
// was lost is not counted twice; one batch per consumer is in flight at a time, resent as it was
// until it is answered. Counted admissions stay here until a reply newer than their counting
// covers them (the fallback then reads them in the known count instead). A Redis that lost its
// data gets every uncovered admission again.
import type { ConsumeResult } from '../store.js'

/** One write-back line: `count` admissions in minute bucket `minute` (-1: left the minute window) and day bucket `day`. */
export interface WriteBackEntry {
  readonly minute: number
  readonly day: number
  readonly count: number
}

type State = 'awaiting' | 'pending' | 'sending' | 'applied'

interface Entry {
  minute: number
  day: number
  n: number
  /** awaiting: its script is queued in Redis (late reply to come); pending: to write back; sending: in the batch in flight; applied: counted in Redis. */
  state: State
  /** Redis time by which it was counted (applied). */
  appliedAt: number
}

interface Account {
  entries: Entry[]
  /** Sequence number of the batch in flight or to resend (its entries are `sending`); 0: none. */
  seq: number
  flushing: boolean
}

export interface WriteBackOptions {
  /** Adds `entries` to `id`'s windows unless batch `seq` was applied already; resolves with the Redis time it ran. */
  send: (id: string, seq: number, entries: WriteBackEntry[]) => Promise<number>
  /** True while `id`'s shard answers (its breaker is closed). */
  canSend: (id: string) => boolean
}

export interface Own {
  minute: number
  day: number
  oldestMinute: number
  oldestDay: number
}

export interface Ledger {
  /** A fallback admission of `id` in these buckets; `late`: the request's script, still queued in Redis. */
  record: (id: string, minute: number, day: number, late?: Promise<ConsumeResult>) => void
  /** This process's fallback admissions of `id` not yet covered by a reply, in buckets from these on, and the oldest of those buckets (-1: none). */
  own: (id: string, minuteFrom: number, dayFrom: number) => Own
  /** True while some admission of `id` is not known to be counted in Redis. */
  unresolved: (id: string) => boolean
  /** Any consumer's admissions still not counted in Redis: the fallback is still in play. */
  anyUnresolved: () => boolean
  /** A reply about `id` at Redis time `at`: what was counted before it is in its counts now. */
  covered: (id: string, at: number) => void
  /** The data of the consumers `which` selects was lost: everything not covered goes back again. */
  lost: (which: (id: string) => boolean) => void
  /** Writes `id`'s pending admissions back (or resends the batch in flight); resolves when answered or failed. */
  flush: (id: string) => Promise<void>
  /** Flushes every consumer `which` selects (default: those whose shard answers). */
  flushAll: (which?: (id: string) => boolean) => Promise<void>
  /** Drops what left every window (`from`: the oldest minute and day bucket still in `id`'s windows). */
  prune: (from: (id: string) => { minute: number, day: number }) => void
  forget: (id: string) => void
  readonly size: number
}

export function createLedger (opts: WriteBackOptions): Ledger {
  const accounts = new Map<string, Account>()
  let seq = 0

  function account (id: string): Account {
    let a = accounts.get(id)
    if (a === undefined) {
      a = { entries: [], seq: 0, flushing: false }
      accounts.set(id, a)
    }
    return a
  }

  function soon (id: string): void {
    if (opts.canSend(id)) setImmediate(() => { void flush(id) })
  }

  async function flush (id: string): Promise<void> {
    const a = accounts.get(id)
    if (a === undefined || a.flushing) return
    if (a.seq === 0) {
      const batch = a.entries.filter((e) => e.state === 'pending')
      if (batch.length === 0) return
      for (const e of batch) e.state = 'sending'
      a.seq = ++seq
    }
    const sending = a.entries.filter((e) => e.state === 'sending')
    const batchSeq = a.seq
    a.flushing = true
    try {
      const at = await opts.send(id, batchSeq, sending.map((e) => ({ minute: e.minute, day: e.day, count: e.n })))
      if (a.seq !== batchSeq) return // the data was lost meanwhile: everything is pending again
      for (const e of sending) {
        if (e.state !== 'sending') continue
        e.state = 'applied'
        e.appliedAt = at
      }
      a.seq = 0
    } catch {
      // Unknown whether it was applied: resent as it is, same sequence number, next time.
    } finally {
      a.flushing = false
    }
  }

  return {
    record (id, minute, day, late) {
      const a = account(id)
      if (late !== undefined) {
        const entry: Entry = { minute, day, n: 1, state: 'awaiting', appliedAt: 0 }
        a.entries.push(entry)
        late.then((result) => {
          if (entry.state !== 'awaiting') return
          if (result.outcome === 'ok') {
            entry.state = 'applied'
            entry.appliedAt = result.now
          } else {
            entry.state = 'pending'
            soon(id)
          }
        }, () => {
          if (entry.state !== 'awaiting') return
          entry.state = 'pending'
          soon(id)
        })
        return
      }
      const same = a.entries.find((e) => e.state === 'pending' && e.minute === minute && e.day === day)
      if (same !== undefined) same.n++
      else a.entries.push({ minute, day, n: 1, state: 'pending', appliedAt: 0 })
      soon(id)
    },
    own (id, minuteFrom, dayFrom) {
      const own: Own = { minute: 0, day: 0, oldestMinute: -1, oldestDay: -1 }
      for (const e of accounts.get(id)?.entries ?? []) {
        if (e.minute >= minuteFrom) {
          own.minute += e.n
          if (own.oldestMinute < 0 || e.minute < own.oldestMinute) own.oldestMinute = e.minute
        }
        if (e.day >= dayFrom) {
          own.day += e.n
          if (own.oldestDay < 0 || e.day < own.oldestDay) own.oldestDay = e.day
        }
      }
      return own
    },
    unresolved: (id) => accounts.get(id)?.entries.some((e) => e.state !== 'applied') ?? false,
    anyUnresolved () {
      for (const a of accounts.values()) if (a.entries.some((e) => e.state !== 'applied')) return true
      return false
    },
    covered (id, at) {
      const a = accounts.get(id)
      if (a === undefined) return
      a.entries = a.entries.filter((e) => e.state !== 'applied' || e.appliedAt >= at)
      if (a.entries.length === 0 && !a.flushing) accounts.delete(id)
    },
    lost (which) {
      for (const [id, a] of accounts) {
        if (!which(id)) continue
        for (const e of a.entries) e.state = 'pending'
        a.seq = 0
      }
    },
    flush,
    async flushAll (which = opts.canSend) {
      await Promise.all([...accounts.keys()].filter(which).map(flush))
    },
    prune (from) {
      for (const [id, a] of accounts) {
        if (a.flushing) continue
        const { minute, day } = from(id)
        const kept: Entry[] = []
        for (const e of a.entries) {
          if (e.day < day) continue // out of both windows: nothing left to count or write back
          if (e.minute >= 0 && e.minute < minute && e.state !== 'sending') e.minute = -1
          const twin = e.minute < 0 && e.state !== 'awaiting' && e.state !== 'sending'
            ? kept.find((k) => k.minute < 0 && k.day === e.day && k.state === e.state)
            : undefined
          if (twin === undefined) kept.push(e)
          else {
            twin.n += e.n
            twin.appliedAt = Math.max(twin.appliedAt, e.appliedAt)
          }
        }
        if (kept.length === 0 && a.seq === 0) accounts.delete(id)
        else a.entries = kept
      }
    },
    forget (id) { accounts.delete(id) },
    get size () { return accounts.size }
  }
}
