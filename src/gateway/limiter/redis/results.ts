// The Redis path's answers in the store contract's shape: what the last reply of an id said about
// its windows, less the units this process holds unspent, so headers count down request by request
// between calls. A rejection shows the units counted with what is kept back: why there was no room.
import type { ConsumeOutcome, ConsumeResult, WindowState } from '../store.js'
import { DAY_BUCKET_MS, MINUTE_BUCKET_MS } from '../arithmetic.js'
import { unwrittenUnits, type Account } from './account.js'
import type { GrantReply, WindowReply } from './scripts.js'

function window (w: WindowReply | undefined, pool: number, kept: number, rejected: boolean, now: number, length: number): WindowState {
  if (w === undefined) return { count: 0, resetAt: now + length, retryAt: 0 }
  return { count: Math.max(0, rejected ? w.used + kept : w.used - pool), resetAt: w.resetAt, retryAt: rejected ? w.retryAt : 0 }
}

/** `outcome` 'peek': read from `reply` (a read call), as a decision would find the windows now. */
export function consumeResult (a: Account, outcome: ConsumeOutcome | 'peek', now: number, via: 'store' | 'grant' | 'fallback', bannedUntil = 0, reply?: GrantReply): ConsumeResult {
  const view = reply ?? a.view
  // Units counted and not spent yet are not used; reserve admissions not yet counted are.
  const pool = reply === undefined ? a.pool - unwrittenUnits(a) : 0
  const kept = view?.held ?? 0
  let decided: ConsumeOutcome = outcome === 'peek' ? 'ok' : outcome
  if (outcome === 'peek' && view !== undefined) {
    const full = view.minute.used + kept >= a.limits.perMinute || view.day.used + kept >= a.limits.perDay || (a.monthLimit > 0 && !a.monthSoft && view.month.used + kept >= a.monthLimit)
    decided = bannedUntil > now ? 'key_banned' : full ? 'rate_limited' : 'ok'
  }
  const rejected = decided === 'rate_limited'
  return {
    outcome: decided,
    now,
    minute: window(view?.minute, pool, kept, rejected, now, 60 * MINUTE_BUCKET_MS),
    day: window(view?.day, pool, kept, rejected, now, 96 * DAY_BUCKET_MS),
    month: a.monthLimit > 0 ? window(view?.month, pool, kept, rejected, now, 0) : undefined,
    bannedUntil: decided === 'key_banned' || decided === 'ban_started' ? bannedUntil : 0,
    via: via === 'store' ? undefined : via
  }
}
