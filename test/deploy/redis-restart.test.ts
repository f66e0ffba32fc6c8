// What is billed survives a Redis crash with the shipped settings: a real redis-server started with
// the options of deploy/compose/docker-compose.yml (AOF, appendfsync everysec; its own temp dir for
// /data), a gateway on month quotas with a soft quota (overage: allow), a month whose earlier days
// already hold units (the limiter's month count as grant.lua keeps it, and the usage history of
// earlier days written by the history's own writer), today's requests through the gateway past both
// quotas; then `kill -9` Redis, start it again on the same dir, and the month's counts, the overage
// and `keys usage --csv` read exactly as before (the last request is > 1 s before the kill, so
// everysec's last second holds nothing), a consumer past its hard quota is still refused, and the
// soft quota's overage goes on from where it was. The same run on `--save '' --appendonly no` (the
// old compose settings) loses them: the control that shows the test can tell.
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { KeyRecord } from '../../src/gateway/config/types.js'
import { DAY_MS, dayOf } from '../../src/gateway/history/days.js'
import { createRedisHistory } from '../../src/gateway/history/redis-history.js'
import { DecisionTally } from '../../src/gateway/history/tally.js'
import { decide } from '../../src/gateway/limiter/decide.js'
import { cli, cliInProcess, type CliResult } from '../helpers/cli.js'
import { composeFile, REDIS_PERSISTENCE, redisServerOptions } from '../helpers/deploy.js'
import { startGateway, type StartedGateway } from '../helpers/gateway.js'
import { DEMO_KEYS, testConfig } from '../helpers/config-fixture.js'
import { poll, sleep } from '../helpers/poll.js'
import { call, COST_ROUTES, METERED_PLANS } from '../helpers/quota.js'
import { startRedis, type RedisProcess } from '../helpers/redis.js'

/** The shipped redis-server options, but `dir`: each test's Redis writes in its own temp dir (its working directory). */
function shippedRedisArgs (): string[] {
  const options = redisServerOptions(composeFile({}).services.redis.command as string[])
  return [...options].filter(([name]) => name !== 'dir').flatMap(([name, value]) => [`--${name}`, value])
}
const NO_PERSISTENCE = ['--save', '', '--appendonly', 'no']

/** Longer than appendfsync everysec's second: what was written before it is on disk. */
const AFTER_LAST_WRITE_MS = 1_500

const CONFIG = testConfig({ 'plans.yaml': METERED_PLANS, 'routes.yaml': COST_ROUTES })

/** The calendar month (UTC) of Unix ms as grant.lua numbers it. */
function monthIndex (ms: number): number {
  const d = new Date(ms)
  return d.getUTCFullYear() * 12 + d.getUTCMonth()
}

/** Earlier days of this month (at most two) that the usage history holds before today's requests, as a process of those days wrote them. */
async function plantEarlierDays (redis: RedisProcess, today: number): Promise<number> {
  const business = CONFIG.keysById.get('demo-business') as KeyRecord
  const tally = new DecisionTally()
  let days = 0
  for (const back of [2, 1]) {
    const at = today - back * DAY_MS
    if (monthIndex(at) !== monthIndex(today)) continue
    for (let i = 0; i < 3; i++) {
      tally.note(business, decide({
        outcome: 'ok',
        now: at + i,
        minute: { count: 1, resetAt: at + 60_000, retryAt: 0 },
        day: { count: 1, resetAt: at + DAY_MS, retryAt: 0 },
        month: { count: 3 * days + i + 1, resetAt: Date.UTC(new Date(today).getUTCFullYear(), new Date(today).getUTCMonth() + 1, 1), retryAt: 0 },
        bannedUntil: 0
      }, business.limits, business.plan, 1))
    }
    days++
  }
  const history = createRedisHistory(new Redis(redis.url))
  await history.write(tally.drain())
  await history.close()
  return days
}

interface MonthView { count: number, limit: number, overage?: number }
async function month (gw: StartedGateway, id: string): Promise<MonthView | undefined> {
  const res = await fetch(`${gw.adminUrl}/admin/consumers/${id}`)
  return (await res.json() as { usage?: { month?: MonthView } }).usage?.month
}

/** What is billed, read through the admin API and the CLI (`keys usage --csv` from the first of the month). */
async function billed (gw: StartedGateway, fromDate: string, runCli: (args: string[]) => Promise<CliResult>): Promise<{ business: MonthView | undefined, free: MonthView | undefined, csv: string, freeCsv: string }> {
  const usage = async (id: string): Promise<string> => {
    const run = await runCli(['keys', 'usage', id, '--csv', '--from', fromDate, '--admin', gw.adminUrl])
    if (run.code !== 0) throw new Error(`keys usage ${id}: exit ${run.code}: ${run.stderr}`)
    return run.stdout.trim()
  }
  const [csv, freeCsv] = await Promise.all([usage('demo-business'), usage('demo-free')])
  return { business: await month(gw, 'demo-business'), free: await month(gw, 'demo-free'), csv, freeCsv }
}

/** The lines of a `keys usage --csv` output with a count (days without any left out of the test's log). */
const counted = (csv: string): string => csv.split('\n').filter((line) => !line.endsWith(',0,0,0,0,0')).join('\n')

async function storeState (gw: StartedGateway): Promise<unknown> {
  const res = await fetch(`${gw.adminUrl}/readyz`)
  return (await res.json() as { checks: Record<string, { state?: string }> }).checks.store?.state
}

interface Run {
  earlierDays: number
  before: Awaited<ReturnType<typeof billed>>
  after: Awaited<ReturnType<typeof billed>>
  /** free's next 3 requests after the restart: status or error code. */
  freeAfter: Array<string | number>
  /** business's next request after the restart: status and X-Quota-Overage. */
  businessAfter: [number, string | undefined]
}

/** Earlier days planted, today's requests, kill -9, restart on the same dir: what was read before and after. */
async function crashRun (t: Test, redisArgs: string[], runCli: (args: string[]) => Promise<CliResult>): Promise<Run> {
  const redis = await startRedis(t, redisArgs)
  let redisNow = Number((await redis.cli('TIME')).split('\n')[0]) * 1000
  // One calendar month for the whole run: a minute before one ends, wait for the next (a UTC day
  // may end during the run: today's requests may then be on two lines of the CSV).
  if (monthIndex(redisNow + 60_000) !== monthIndex(redisNow)) {
    await sleep((dayOf(redisNow) + 1) * DAY_MS - redisNow + 1_000)
    redisNow = Number((await redis.cli('TIME')).split('\n')[0]) * 1000
  }
  const earlierDays = await plantEarlierDays(redis, redisNow)
  // Earlier days' units in the month as the grant script keeps them: business 18 of its soft 20, free 16 of its hard 20.
  await redis.cli('HSET', 'rl:{demo-business}', 'Q', String(monthIndex(redisNow)), 'q', '18')
  await redis.cli('HSET', 'rl:{demo-free}', 'Q', String(monthIndex(redisNow)), 'q', '16')
  const gw = await startGateway(t, { config: CONFIG, limiter: { settings: { redisUrl: redis.url } }, history: { flushMs: 3_600_000 } })

  // Today: business 2 GETs to its quota, a POST (5) and a GET past it (6 units of overage; 8 of its
  // 10 a minute, so the minute still has room after the restart); free 4 GETs to its quota, then refused.
  const business = [await call(gw, DEMO_KEYS.business), await call(gw, DEMO_KEYS.business), await call(gw, DEMO_KEYS.business, true), await call(gw, DEMO_KEYS.business)]
  t.same(business.map((a) => [a.status, a.headers['x-quota-overage']]), [[200, undefined], [200, undefined], [201, '5'], [200, '6']], 'business: past its soft quota, admitted and counted')
  const free = []
  for (let i = 0; i < 6; i++) free.push(await call(gw, DEMO_KEYS.free))
  t.same(free.map((a) => a.code ?? a.status), [200, 200, 200, 200, 'quota_exceeded', 'quota_exceeded'], 'free: its month used up')

  // A process may hold units counted ahead within their second (given back after it): wait for the month to settle.
  const settled = await poll(async () => (await month(gw, 'demo-business'))?.count === 26 && (await month(gw, 'demo-free'))?.count === 20, 5_000, 100)
  t.ok(settled, 'the months settle on the units spent (business 18 + 8, free 16 + 4)')
  const fromDate = new Date(Date.UTC(new Date(redisNow).getUTCFullYear(), new Date(redisNow).getUTCMonth(), 1)).toISOString().slice(0, 10)
  const before = await billed(gw, fromDate, runCli) // the admin read flushes the history: written to Redis now
  t.comment(`before the kill (${earlierDays} earlier day(s) in the history): business month ${JSON.stringify(before.business)}, free month ${JSON.stringify(before.free)}\n${counted(before.csv)}\n${counted(before.freeCsv)}`)

  await sleep(AFTER_LAST_WRITE_MS)
  const pid = redis.pid()
  redis.signal('SIGKILL')
  await poll(async () => { try { process.kill(pid, 0); return false } catch { return true } }, 5_000, 20)
  await redis.start()
  const back = await poll(async () => await storeState(gw) === 'ok', 15_000, 100)
  t.ok(back, 'the gateway counts in Redis again')

  const after = await billed(gw, fromDate, runCli)
  t.comment(`after kill -9 and restart: business month ${JSON.stringify(after.business)}, free month ${JSON.stringify(after.free)}\n${counted(after.csv)}\n${counted(after.freeCsv)}`)
  const freeAfter: Array<string | number> = []
  for (let i = 0; i < 3; i++) freeAfter.push(await call(gw, DEMO_KEYS.free).then((a) => a.code ?? a.status))
  const next = await call(gw, DEMO_KEYS.business)
  t.comment(`after: free's next 3 requests ${freeAfter.join(',')}; business's next ${next.status} with X-Quota-Overage ${next.headers['x-quota-overage'] ?? '(none)'}`)
  return { earlierDays, before, after, freeAfter, businessAfter: [next.status, next.headers['x-quota-overage']] }
}

t.test('the shipped settings are AOF, everysec', async (t) => {
  const options = redisServerOptions(shippedRedisArgs())
  for (const [name, value] of Object.entries(REDIS_PERSISTENCE)) t.equal(options.get(name), value, `${name} ${value}`)
})

t.test('the shipped Redis settings: kill -9 and a restart on the same dir forget nothing billed', async (t) => {
  const run = await crashRun(t, shippedRedisArgs(), cli) // the CLI as `npm run cli` runs it: a process of its own
  t.match(run.before.business, { count: 26, limit: 20, overage: 6 })
  t.match(run.before.free, { count: 20, limit: 20 })
  const rows = run.before.csv.split('\n').filter((line) => line.includes(',demo-business,') && !line.endsWith(',0,0,0,0,0'))
    .map((line) => line.split(',').slice(3).map(Number))
  const today = rows.slice(run.earlierDays).reduce((sum, row) => sum.map((value, i) => value + (row[i] ?? 0)), [0, 0, 0, 0, 0])
  t.same(rows.slice(0, run.earlierDays), Array(run.earlierDays).fill([3, 0, 3, 3, 0]), 'the history: each earlier day\'s 3 requests')
  t.same(today, [4, 0, 4, 8, 6], 'then today\'s 4 (8 units, 6 over)')
  t.same(run.after, run.before, 'the month\'s counts and keys usage --csv read exactly as before')
  t.same(run.freeAfter, ['quota_exceeded', 'quota_exceeded', 'quota_exceeded'], 'free is still past its month: refused')
  t.same(run.businessAfter, [200, '7'], 'business\'s overage goes on from 6')
})

t.test('control: the old settings (--save \'\' --appendonly no) forget the month and the history', async (t) => {
  const run = await crashRun(t, NO_PERSISTENCE, async (args) => await cliInProcess(args))
  t.match(run.before.business, { count: 26, overage: 6 })
  t.not(run.after.csv, run.before.csv, 'keys usage --csv reads otherwise after the restart')
  t.ok((run.after.business?.count ?? 0) < 26, `the month forgotten but for what this process re-seeds (${run.after.business?.count ?? '?'} of 26)`)
  t.same(run.freeAfter, [200, 200, 200], 'free admitted again past its month')
  t.equal(run.businessAfter[1], undefined, 'business\'s overage no longer counted')
})
