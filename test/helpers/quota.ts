// What the tests of monthly quotas, costs and soft quotas share: a config with a month quota on each
// demo plan and `cost: 5` on POST /v1/pets, one request with its status, code and headers, and a
// metered month replayed on an injected clock (days before the one under test filled the month).
import type { Test } from 'tap'
import { startGateway, type StartedGateway } from './gateway.js'
import { bearer, configTexts, DEMO_KEYS, testConfig } from './config-fixture.js'

/** routes.yaml as in the fixture, plus POST /v1/pets at 5 units. */
export const COST_ROUTES = `${configTexts()['routes.yaml']}  - { method: POST, path: /v1/pets, cost: 5 }\n`

/**
 * free: a hard quota (20 units a month, 15 a day); pro: day and month of 10 (the day binds past the
 * month's end); business: a soft quota (overage: allow) of 20; enterprise: its keys' own limits.
 */
export const METERED_PLANS = [
  'plans:',
  '  free: { perMinute: 10, perDay: 15, perMonth: 20 }',
  '  pro: { perMinute: 10, perDay: 10, perMonth: 10 }',
  '  business: { perMinute: 10, perDay: 20, perMonth: 20, overage: allow }',
  '  enterprise: { custom: true }',
  'anonymous: { perMinute: 30, perDay: 300 }',
  'ban: { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86400 }',
  ''
].join('\n')

export interface Answer {
  status: number
  code: string | undefined
  message: string | undefined
  headers: Record<string, string>
}

/** The headers a quota test looks at, lower-case, absent ones left out. */
const WATCHED = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-policy', 'ratelimit', 'retry-after', 'x-quota-overage']

/** One request: `GET /v1/pets?limit=1` (1 unit), or with `post` a new pet (POST /v1/pets, 5 units with COST_ROUTES). */
export async function call (gw: StartedGateway, key: string, post = false): Promise<Answer> {
  const init: RequestInit = post
    ? { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json' }, body: '{"name":"Rex","categoryId":1}' }
    : { headers: bearer(key) }
  const res = await fetch(`${gw.url}/v1/pets${post ? '' : '?limit=1'}`, init)
  const text = await res.text()
  const body = res.status >= 400 && text.startsWith('{') ? JSON.parse(text) as { code?: string, message?: string } : {}
  const headers: Record<string, string> = {}
  for (const name of WATCHED) {
    const value = res.headers.get(name)
    if (value !== null) headers[name] = value
  }
  return { status: res.status, code: body.code, message: body.message, headers }
}

/** `n` GETs; their statuses. */
export async function spend (gw: StartedGateway, key: string, n: number): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < n; i++) statuses.push((await call(gw, key)).status)
  return statuses
}

export const unix = (iso: string): number => Date.parse(iso) / 1000

export interface MeteredGateway {
  gw: StartedGateway
  /** Sets the gateway's clock. */
  at: (iso: string) => void
}

/**
 * A gateway on METERED_PLANS and COST_ROUTES (in-process store) whose month of March 2030 is
 * replayed: demo-free spends 10 units on the 30th and 10 on the 31st at 23:00 (its 20: the month is
 * out, the day is not); demo-business 10 on the 29th and 10 on the 30th (its 20), then on the 31st
 * at 12:00 one GET, one POST (5) and 4 GETs past its soft quota (10 units of overage), and one GET
 * the minute refuses. The clock is left at 2030-03-31T23:00:30Z.
 */
export async function meteredMonth (t: Test): Promise<MeteredGateway> {
  let clock = Date.parse('2030-03-29T10:00:00Z')
  const gw = await startGateway(t, {
    config: testConfig({ 'plans.yaml': METERED_PLANS, 'routes.yaml': COST_ROUTES }),
    now: () => clock,
    history: { flushMs: 3_600_000 }
  })
  const at = (iso: string): void => { clock = Date.parse(iso) }
  const expect = (what: string, got: number[], want: number[]): void => {
    if (got.join() !== want.join()) throw new Error(`${what}: ${got.join()} (expected ${want.join()})`)
  }
  expect('business, the 29th', await spend(gw, DEMO_KEYS.business, 10), Array(10).fill(200))
  at('2030-03-30T10:00:00Z')
  expect('business, the 30th', await spend(gw, DEMO_KEYS.business, 10), Array(10).fill(200))
  expect('free, the 30th', await spend(gw, DEMO_KEYS.free, 10), Array(10).fill(200))
  at('2030-03-31T12:00:00Z')
  const overage = [await call(gw, DEMO_KEYS.business), await call(gw, DEMO_KEYS.business, true)]
  for (let i = 0; i < 4; i++) overage.push(await call(gw, DEMO_KEYS.business))
  overage.push(await call(gw, DEMO_KEYS.business))
  expect('business past its quota, the 31st', overage.map((a) => a.status), [200, 201, 200, 200, 200, 200, 429])
  at('2030-03-31T23:00:00Z')
  expect('free, the 31st', await spend(gw, DEMO_KEYS.free, 10), Array(10).fill(200))
  at('2030-03-31T23:00:30Z')
  return { gw, at }
}
