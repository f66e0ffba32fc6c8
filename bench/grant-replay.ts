// What grant.lua costs redis-server on real traffic, without the gateway process's timing in the way: grant calls a
// zipf-calls run recorded (ZIPF_CALLS_RECORD of bench/zipf-calls.ts, each checkout's own store recording its own calls:
// the ARGV layout differs between checkouts) sent again to a fresh redis-server with that checkout's script, at their
// recorded spacing (calls of one recorded millisecond together) and phase within the second, their buckets moved to
// the replay's clock (moveBuckets), so the script's paths (a bucket's slide, a reserve's renewal, a give-back) come as
// often as they did. Measured per call and per entry: the script's own time (INFO commandstats,
// cmdstat_evalsha usec: wall time inside Redis) and redis-server's CPU (its main thread's, /proc/PID/schedstat: the
// script, the socket, the event loop), and the commands the scripts ran. Variants alternate by round (order reversed every other
// round); the table is the medians.
//   node --import ./src/ts-resolve.ts bench/grant-replay.ts CHECKOUT=CALLS.json [CHECKOUT=CALLS.json …]
//   GRANT_REPLAY_ROUNDS (default 7). CHECKOUT is the root whose src/gateway/limiter/lua/grant.lua runs.
//   GRANT_REPLAY_SIDE_BY_SIDE=1: every variant's redis-server runs at once (all pinned to the same core), and each
//   recorded call goes to all of them together, so what else loads the machine loads them alike; the calls files must
//   hold as many calls (the same file, or one converted). Each round's difference is then paired, not interleaved:
//   the server sent each call first pays about 7 % more (the one after finds Redis's code and the Lua VM in the
//   caches of the core they share), so the order alternates by round and the difference printed is order-balanced —
//   the mean of the median paired difference of the rounds where the variant went first and of those where it went
//   second (run an even number of rounds).
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { median } from './lib/load.js'
import { startScratchRedis } from './lib/scratch-redis.js'
import { parseCommandStats } from './lib/commandstats.js'
import { mainThreadCpuMicros } from './lib/proc-cpu.js'
import { readRecordedCalls, type RecordedCall } from './lib/recorded-calls.js'


interface ReplayResult { calls: number, entries: number, scriptMicros: number, redisCpuMicros: number, commands: Record<string, number> }

/**
 * `call` as sent `shiftMs` later (whole seconds): the minute buckets its entries name (the blocks' bucket, the bucket
 * of a first refusal, an adjustment's) moved by as many seconds, an adjustment's day bucket by as many day buckets as
 * lie between the two instants — so a give-back lands in the bucket it would have, not in one long gone (which writes
 * old day buckets and sets the day hash's expiry: work the live run never did). Months are left as recorded.
 */
function moveBuckets (call: RecordedCall, shiftMs: number): RecordedCall {
  const seconds = shiftMs / 1000
  const days = Math.floor((call.at + shiftMs) / 900_000) - Math.floor(call.at / 900_000)
  const args = call.args.map((arg, position) => {
    if (position === 0) return arg
    if (position % 3 === 1) { // 'minuteLimit … mb mine [waited]': mb (a bucket, -1 none) and waited (0 none) move
      const fields = arg.split(' ')
      if (Number(fields[9]) > 0) fields[9] = String(Number(fields[9]) + seconds)
      if (fields.length > 11 && Number(fields[11]) > 0) fields[11] = String(Number(fields[11]) + seconds)
      return fields.join(' ')
    }
    if (position % 3 === 0 && arg !== '') { // adjustments 'minute,day,month,delta[a];…' (0: none)
      return arg.split(';').map((item) => {
        const [minute, day, ...rest] = item.split(',')
        return [Number(minute) > 0 ? String(Number(minute) + seconds) : minute, Number(day) > 0 ? String(Number(day) + days) : day, ...rest].join(',')
      }).join(';')
    }
    return arg
  })
  return { at: call.at + shiftMs, keys: call.keys, args }
}

/** What one replay sends: a script and its calls. */
interface Replayed { lua: string, calls: readonly RecordedCall[] }

/** Replays each variant's calls with its script on a fresh redis-server of its own, all at once (call i to each together). */
async function replay (variants: readonly Replayed[]): Promise<ReplayResult[]> {
  const servers = await Promise.all(variants.map(async () => await startScratchRedis('grant-replay')))
  const clients = servers.map((redis) => new Redis({ port: redis.port, host: '127.0.0.1' }))
  try {
    const shas = variants.map(({ lua }) => createHash('sha1').update(lua).digest('hex'))
    for (const [index, client] of clients.entries()) {
      await client.script('LOAD', variants[index]!.lua)
      await client.set('rl:{#epoch}', 'deployed,0')
      await client.config('RESETSTAT')
    }
    const cpuBefore = servers.map((redis) => mainThreadCpuMicros(redis.pid))
    const timeline = variants[0]!.calls
    const first = timeline[0]?.at ?? 0
    // The replay starts at the recorded first call's millisecond of a second, whole seconds later: its minute
    // buckets are the recorded ones moved by whole seconds, and the calls' own buckets are moved alike.
    const start = Date.now() + 1000 + (((first - Date.now()) % 1000) + 1000) % 1000
    const moved = variants.map(({ calls }) => calls.map((call) => moveBuckets(call, start - first)))
    const entries = variants.map(() => 0)
    const pending: Array<Promise<unknown>> = []
    for (let index = 0; index < timeline.length;) {
      const at = timeline[index]!.at
      const wait = at + (start - first) - Date.now()
      if (wait > 0) await new Promise((done) => setTimeout(done, wait))
      for (; index < timeline.length && timeline[index]!.at === at; index++) {
        variants.forEach((_, variant) => {
          const call = moved[variant]![index]!
          entries[variant]! += call.keys.length / 2
          pending.push(clients[variant]!.evalsha(shas[variant]!, call.keys.length, ...call.keys, ...call.args))
        })
      }
    }
    await Promise.all(pending)
    return await Promise.all(clients.map(async (client, variant) => {
      const redisCpu = mainThreadCpuMicros(servers[variant]!.pid) - cpuBefore[variant]!
      const stats = parseCommandStats(await client.info('commandstats'))
      return { calls: timeline.length, entries: entries[variant]!, scriptMicros: stats.get('evalsha')?.usec ?? 0, redisCpuMicros: redisCpu, commands: Object.fromEntries([...stats].map(([name, stat]) => [name, stat.calls])) }
    }))
  } finally {
    for (const client of clients) client.disconnect()
    await Promise.all(servers.map(async (redis) => { await redis.stop() }))
  }
}

async function main (): Promise<void> {
  const rounds = Number(process.env.GRANT_REPLAY_ROUNDS ?? 7)
  const variants = process.argv.slice(2).map((pair) => {
    const [root, file] = pair.split('=') as [string, string]
    return { name: pair, lua: readFileSync(join(root, 'src/gateway/limiter/lua/grant.lua'), 'utf8'), calls: readRecordedCalls(file) }
  })
  const sideBySide = process.env.GRANT_REPLAY_SIDE_BY_SIDE === '1'
  if (sideBySide && variants.some((variant) => variant.calls.length !== variants[0]!.calls.length)) throw new Error('side by side: every calls file must hold as many calls')
  const results = new Map<string, ReplayResult[]>(variants.map((variant) => [variant.name, []]))
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse()
    const runs = sideBySide ? [order] : order.map((variant) => [variant])
    for (const together of runs) {
      const replayed = await replay(together)
      together.forEach((variant, index) => {
        results.get(variant.name)!.push(replayed[index]!)
        process.stderr.write(`round ${round + 1} ${variant.name}: ${JSON.stringify(replayed[index])}\n`)
      })
    }
  }
  console.log(`grant calls replayed at their recorded spacing, ${rounds} ${sideBySide ? 'side-by-side' : 'interleaved'} rounds; medians; load average (1, 5, 15 min) ${loadavg().map((average) => average.toFixed(2)).join(' ')}`)
  console.log('| checkout=calls | calls | entries | script µs per call | script µs per entry | Redis CPU µs per call | Redis CPU µs per entry | commands per entry (script\'s) |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---|')
  for (const [name, list] of results) {
    const { calls, entries, commands } = list[0]!
    const inner = Object.entries(commands).filter(([command]) => !['evalsha', 'info', 'config', 'set', 'script', 'ping'].includes(command)).map(([command, count]) => `${command} ${(count / entries).toFixed(3)}`).join(', ')
    console.log(`| ${name} | ${calls} | ${entries} | ${median(list.map((result) => result.scriptMicros / calls)).toFixed(2)} | ${median(list.map((result) => result.scriptMicros / entries)).toFixed(2)} | ${median(list.map((result) => result.redisCpuMicros / calls)).toFixed(2)} | ${median(list.map((result) => result.redisCpuMicros / entries)).toFixed(2)} | ${inner} |`)
  }
  if (!sideBySide || variants.length < 2) return
  // Order-balanced paired differences against the last variant (see the header): even rounds ran in the given order.
  const last = results.get(variants[variants.length - 1]!.name)!
  for (const variant of variants.slice(0, -1)) {
    const list = results.get(variant.name)!
    const balanced = (pick: (result: ReplayResult) => number): string => {
      const differences = list.map((result, round) => ({ round, difference: (pick(result) - pick(last[round]!)) / result.calls }))
      const first = median(differences.filter(({ round }) => round % 2 === 0).map(({ difference }) => difference))
      const second = median(differences.filter(({ round }) => round % 2 === 1).map(({ difference }) => difference))
      return `${((first + second) / 2).toFixed(2)} (going first ${first.toFixed(2)}, second ${second.toFixed(2)})`
    }
    console.log(`${variant.name} less ${variants[variants.length - 1]!.name}, µs per call, order-balanced: script ${balanced((result) => result.scriptMicros)}; Redis CPU ${balanced((result) => result.redisCpuMicros)}`)
  }
}

await main()
