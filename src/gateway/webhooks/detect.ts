// Which events happened, noticed where the counts already are and never waiting for anything: a
// decision of the limiter (a month that binds, the month's refusal, a ban that starts) and the usage
// history's month counts after each flush (every process's units on Redis). Each check is a Map
// lookup and a few comparisons; an event found is pushed to a bounded list that the emitter drains in
// the background (plugin.ts). This process remembers, per consumer and month, the highest share it
// already handed on, so a consumer past 80 % is not handed on at every request; the once-key in the
// queue is what makes an event once across processes and restarts (a restarted process hands the
// crossing on again at its first count, and the queue refuses it).
import type { KeyRecord, ConfigSnapshot } from '../config/types.js'
import type { RateLimitDecision } from '../limiter/decision.js'
import { keyBanned, keyExpiring, monthEnd, monthPeriod, quotaExceeded, quotaThreshold, type DetectedEvent } from './events.js'
import type { WebhooksConfig } from './config.js'

/** Events found and not yet drained, at most: past it the newest are dropped (and found again at the next count). */
export const MAX_PENDING_EVENTS = 10_000
const DAY_MS = 86_400_000

interface MonthState {
  period: string
  /** Unix ms of the month's first instant and of the next month's: a decision inside needs no date arithmetic. */
  start: number
  end: number
  /** The highest share handed on this month (0: none). */
  share: number
  exceeded: boolean
}

export interface MonthCount {
  readonly consumerId: string
  readonly plan: string
  readonly units: number
  /** perMonth. */
  readonly quota: number
  readonly overage: boolean
  readonly at: number
}

export interface Detector {
  /** A consumer's decision (the limiter's onResponse): O(1), no I/O. */
  noteDecision: (consumer: KeyRecord, decision: RateLimitDecision) => void
  /** A consumer's month units counted (the history's flush). */
  noteMonth: (count: MonthCount) => void
  /** Keys whose expiry is a configured number of days away (a timer, over the config in force). */
  scanExpiring: (snapshot: ConfigSnapshot, now: number) => void
  /** Takes the events found so far. */
  drain: () => DetectedEvent[]
  /** Puts back events the emitter could not hand on (the queue did not answer), ahead of newer ones. */
  putBack: (events: readonly DetectedEvent[]) => void
}

export function createDetector (config: () => WebhooksConfig | undefined): Detector {
  const months = new Map<string, MonthState>()
  /** `keyId:expiresAt:days` already handed on. */
  const expiring = new Set<string>()
  let pending: DetectedEvent[] = []

  function push (event: DetectedEvent): void {
    if (pending.length < MAX_PENDING_EVENTS) pending.push(event)
  }

  function stateOf (consumerId: string, at: number): MonthState {
    const known = months.get(consumerId)
    if (known !== undefined && at >= known.start && at < known.end) return known
    const end = monthEnd(at)
    const period = monthPeriod(at)
    // A count of the month before, arriving late (a flush just past midnight), must not reset the month
    // in progress: it is judged on its own, unremembered (the once-keys keep it once).
    if (known !== undefined && at < known.start) return { period, start: Date.parse(`${period}-01T00:00:00Z`), end, share: 0, exceeded: false }
    const state = { period, start: Date.parse(`${period}-01T00:00:00Z`), end, share: 0, exceeded: false }
    months.set(consumerId, state)
    return state
  }

  function noteMonth (count: MonthCount): void {
    const webhooks = config()
    if (webhooks === undefined || webhooks.endpoints.length === 0 || count.quota <= 0) return
    const state = stateOf(count.consumerId, count.at)
    const used = count.units / count.quota
    if (used <= state.share) return
    const shares = count.overage ? [...webhooks.thresholds, ...webhooks.overageSteps] : webhooks.thresholds
    for (const share of shares) {
      if (share > state.share && used >= share) {
        push(quotaThreshold({ consumerId: count.consumerId, plan: count.plan, units: count.units, limit: count.quota, threshold: share, at: count.at }))
        state.share = share
      }
    }
  }

  return {
    noteDecision (consumer, decision) {
      if (decision.outcome === 'ok' && decision.window !== 'month' && decision.overage === 0) return
      const webhooks = config()
      if (webhooks === undefined || webhooks.endpoints.length === 0) return
      const at = decision.now
      const quota = consumer.limits.perMonth
      if (decision.outcome === 'key_banned') {
        if (decision.banStarted) push(keyBanned({ consumerId: consumer.consumerId, plan: consumer.plan, window: 'minute', limit: consumer.limits.perMinute, until: decision.reset * 1000, at }))
        return
      }
      if (quota === undefined) return
      if (decision.outcome === 'quota_exceeded') {
        noteMonth({ consumerId: consumer.consumerId, plan: consumer.plan, units: quota, quota, overage: false, at })
        const state = stateOf(consumer.consumerId, at)
        if (!state.exceeded) {
          state.exceeded = true
          push(quotaExceeded({ consumerId: consumer.consumerId, plan: consumer.plan, units: quota, limit: quota, at }))
        }
        return
      }
      if (!decision.allowed) return
      // The month binds (its count is in the decision), or the soft quota's overage says how far past it the month is.
      const units = decision.overage > 0 ? quota + decision.overage : decision.window === 'month' ? decision.limit - decision.remaining : undefined
      if (units !== undefined) noteMonth({ consumerId: consumer.consumerId, plan: consumer.plan, units, quota, overage: consumer.limits.overage === true, at })
    },
    noteMonth,
    scanExpiring (snapshot, now) {
      const webhooks = config()
      if (webhooks === undefined || webhooks.endpoints.length === 0) return
      for (const handed of expiring) {
        const expiresAt = Number(handed.split(':').at(-2))
        if (expiresAt <= now) expiring.delete(handed)
      }
      for (const key of snapshot.keysById.values()) {
        if (key.disabled || key.expiresAt === undefined || key.expiresAt <= now) continue
        // Only the nearest look-ahead that applies: a key found 12 h before its expiry is told "1 day", not "7 days" as well.
        let days: number | undefined
        for (const d of webhooks.expiringDays) if (key.expiresAt - now <= d * DAY_MS) days = d
        if (days === undefined) continue
        const handedKey = `${key.id}:${key.expiresAt}:${days}`
        if (expiring.has(handedKey)) continue
        expiring.add(handedKey)
        push(keyExpiring({ keyId: key.id, consumerId: key.consumerId, plan: key.plan, expiresAt: key.expiresAt, days, at: now }))
      }
    },
    drain () {
      const taken = pending
      pending = []
      return taken
    },
    putBack (events) {
      pending = [...events, ...pending].slice(0, MAX_PENDING_EVENTS)
    }
  }
}
