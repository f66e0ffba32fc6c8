// The leases this process holds, one per consumer at most: a block of admissions counted in Redis
// at once, spent here one by one until its deadline, each answered as the script would have
// answered it. leases.ts decides when to ask for one; this table only keeps and spends them.
import type { Limits } from '../../config/types.js'
import type { ConsumeResult } from '../store.js'

/** What an ended lease hands back: its buckets (by index) and how many of its admissions went unused. */
export interface Unused {
  readonly minuteBucket: number
  readonly dayBucket: number
  readonly count: number
}

export interface Lease {
  readonly limits: Limits
  readonly minuteBucket: number
  readonly dayBucket: number
  readonly granted: number
  used: number
  /** Monotonic ms after which the lease may no longer admit. */
  readonly deadline: number
  /** Monotonic ms when the lease was asked for; `result.now` is the Redis clock the script read. */
  readonly sentAt: number
  readonly result: ConsumeResult
}

export interface LeaseTable {
  /** One admission from `id`'s live lease for these very limits, or undefined (none, spent, ended, or other limits). */
  take: (id: string, limits: Limits) => ConsumeResult | undefined
  /** Holds `lease` for `id` (a lease it replaces was retired first). */
  hold: (id: string, lease: Lease) => void
  /** Ends `id`'s lease; what it did not spend, to hand back. */
  retire: (id: string) => Unused | undefined
  /** Ends every lease past its deadline; what each did not spend. */
  retireEnded: () => Array<[string, Unused]>
  /** Ends every lease (or `id`'s) with nothing handed back: a reset wiped what they counted. */
  drop: (id?: string) => void
  /** Ends every lease; what each did not spend. */
  retireAll: () => Array<[string, Unused]>
  readonly size: number
}

function unusedOf (lease: Lease): Unused | undefined {
  const count = lease.granted - lease.used
  return count > 0 ? { minuteBucket: lease.minuteBucket, dayBucket: lease.dayBucket, count } : undefined
}

/** `monotonic`: ms on a clock that never steps back (performance.now), so a deadline is never overrun. */
export function createLeaseTable (monotonic: () => number): LeaseTable {
  const leases = new Map<string, Lease>()

  function retireWhere (ends: (lease: Lease) => boolean): Array<[string, Unused]> {
    const returns: Array<[string, Unused]> = []
    for (const [id, lease] of leases) {
      if (!ends(lease)) continue
      leases.delete(id)
      const unused = unusedOf(lease)
      if (unused !== undefined) returns.push([id, unused])
    }
    return returns
  }

  return {
    take (id, limits) {
      const lease = leases.get(id)
      if (lease === undefined || lease.used >= lease.granted || lease.limits !== limits) return undefined
      const t = monotonic()
      if (t >= lease.deadline) return undefined
      lease.used++
      const unspent = lease.granted - lease.used
      const r = lease.result
      return {
        outcome: 'ok',
        now: r.now + Math.floor(t - lease.sentAt),
        minute: { count: r.minute.count - unspent, resetAt: r.minute.resetAt, retryAt: 0 },
        day: { count: r.day.count - unspent, resetAt: r.day.resetAt, retryAt: 0 },
        bannedUntil: 0,
        via: 'lease'
      }
    },
    hold (id, lease) { leases.set(id, lease) },
    retire (id) {
      const lease = leases.get(id)
      if (lease === undefined) return undefined
      leases.delete(id)
      return unusedOf(lease)
    },
    retireEnded () {
      const t = monotonic()
      return retireWhere((lease) => t >= lease.deadline)
    },
    drop (id) {
      if (id === undefined) leases.clear()
      else leases.delete(id)
    },
    retireAll: () => retireWhere(() => true),
    get size () { return leases.size }
  }
}
