// Decision arithmetic without a store: binding window, remaining, reset, Retry-After for every
// outcome, and the closed policy's 503 headers.
import t from 'tap'
import { bannedDecision, decide, secondsUntil, unavailableHeaders } from '../../../src/gateway/limiter/decide.js'
import type { ConsumeResult } from '../../../src/gateway/limiter/store.js'

const NOW = Date.UTC(2030, 0, 1, 12)
const LIMITS = { perMinute: 10, perDay: 100 }

function result (over: Partial<ConsumeResult> & { minuteCount?: number, dayCount?: number }): ConsumeResult {
  return {
    outcome: over.outcome ?? 'ok',
    now: NOW,
    minute: over.minute ?? { count: over.minuteCount ?? 1, resetAt: NOW + 61_000, retryAt: 0 },
    day: over.day ?? { count: over.dayCount ?? 1, resetAt: NOW + 97 * 900_000, retryAt: 0 },
    bannedUntil: over.bannedUntil ?? 0
  }
}

t.test('admitted: the window with fewest remaining binds; ties go to the minute', async (t) => {
  const minute = decide(result({ minuteCount: 4, dayCount: 4 }), LIMITS, 'pro')
  t.match(minute, { allowed: true, outcome: 'ok', window: 'minute', limit: 10, remaining: 6, reset: (NOW + 61_000) / 1000, resetIn: 61, retryAfter: undefined })
  const day = decide(result({ minuteCount: 1, dayCount: 95 }), LIMITS, 'pro')
  t.match(day, { window: 'day', limit: 100, remaining: 5, resetIn: 97 * 900 })
  const tie = decide(result({ minuteCount: 10, dayCount: 100 }), LIMITS, 'pro')
  t.equal(tie.window, 'minute')
  t.equal(tie.policyField, '"minute";q=10;w=60, "day";q=100;w=86400')
})

t.test('rate limited: Retry-After waits for the window that frees last, in whole seconds, at least 1', async (t) => {
  const limited = decide(result({
    outcome: 'rate_limited',
    minute: { count: 10, resetAt: NOW + 30_000, retryAt: NOW + 30_500 },
    day: { count: 50, resetAt: NOW + 3_600_000, retryAt: 0 }
  }), LIMITS, 'pro')
  t.match(limited, { allowed: false, outcome: 'rate_limited', rejectedBy: 'minute', retryAfter: 31, remaining: 0 })
  const both = decide(result({
    outcome: 'rate_limited',
    minute: { count: 10, resetAt: NOW + 30_000, retryAt: NOW + 30_000 },
    day: { count: 100, resetAt: NOW + 3_600_000, retryAt: NOW + 3_600_000 }
  }), LIMITS, 'pro')
  t.match(both, { rejectedBy: 'day', retryAfter: 3600 })
  t.equal(secondsUntil(NOW - 5, NOW), 1, 'never 0')
})

t.test('banned: nothing left until the ban ends; ban_started reads as key_banned', async (t) => {
  const banned = bannedDecision(NOW + 899_200, NOW, LIMITS, 'pro', true)
  t.match(banned, { allowed: false, outcome: 'key_banned', remaining: 0, retryAfter: 900, resetIn: 900, banStarted: true })
  t.match(decide(result({ outcome: 'ban_started' }), LIMITS, 'pro'), { outcome: 'key_banned', banStarted: true })
})

t.test('the 503 of the closed policy: the limits, nothing left, retry in 1 s', async (t) => {
  t.same(unavailableHeaders(LIMITS, NOW + 200), {
    'x-ratelimit-limit': '10',
    'x-ratelimit-remaining': '0',
    'x-ratelimit-reset': String(Math.ceil((NOW + 200) / 1000) + 1),
    'ratelimit-policy': '"minute";q=10;w=60, "day";q=100;w=86400',
    ratelimit: '"minute";r=0;t=1',
    'retry-after': '1'
  })
})
