import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, openSync, writeSync } from 'node:fs'
import t from 'tap'
import { parseEnvList, parseVariants } from '../../bench/lib/env-list.js'
import { parseWrk } from '../../bench/lib/wrk.js'
import { cpuMicros, ioCalls, pinProcess, procAvailable, systemMicros, taskset } from '../../bench/lib/proc-cpu.js'

const WRK_OUTPUT = `Running 2s test @ http://127.0.0.1:1234/v1/pets?limit=10
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     5.10ms    2.00ms  40.00ms   90.00%
    Req/Sec     9.80k   500.00     10.50k    70.00%
  Latency Distribution
     50%    4.80ms
     75%    5.90ms
     90%    7.10ms
     99%  850.00us
  19600 requests in 2.00s, 10.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:   9800.12
Transfer/sec:      5.00MB
`

t.test('wrk output: req/s, total, p50/p99 in ms whatever the unit, non-2xx and socket errors', async (t) => {
  const run = parseWrk(WRK_OUTPUT)
  t.equal(run.requestsPerSecond, 9800.12)
  t.equal(run.total, 19600)
  t.equal(run.latencyP50Ms, 4.8)
  t.equal(run.latencyP99Ms, 0.85)
  t.equal(run.non2xx, 7)
  t.equal(run.errors, 3)
})

t.test('extra gateway environment and variants from their one-line settings', async (t) => {
  t.same(parseEnvList('STORE_ON_ERROR=closed, LOG_LEVEL=warn,bad'), { STORE_ON_ERROR: 'closed', LOG_LEVEL: 'warn' })
  t.same(parseEnvList(undefined), {})
  t.same(parseVariants('closed:STORE_ON_ERROR=closed;open:STORE_ON_ERROR=open,X=1; plain'), [
    { name: 'closed', env: { STORE_ON_ERROR: 'closed' } },
    { name: 'open', env: { STORE_ON_ERROR: 'open', X: '1' } },
    { name: 'plain', env: {} }
  ])
})

t.test('CPU time of a process from /proc grows while it works', async (t) => {
  const before = cpuMicros(process.pid)
  // Busy until Node's own account says 100 ms of CPU were used (bounded in wall time: a shared machine may deschedule us).
  const start = process.cpuUsage()
  const deadline = Date.now() + 10_000
  let x = 0
  while (Date.now() < deadline) {
    for (let i = 0; i < 10_000; i++) x += Math.sqrt(x + i)
    const used = process.cpuUsage(start)
    if (used.user + used.system >= 100_000) break
  }
  t.ok(cpuMicros(process.pid) - before >= 50_000, `100 ms of CPU by Node's account is at least 50 ms in /proc (ticks of 10 ms) (${x > 0})`)
  t.equal(cpuMicros(2 ** 22 + 12345), 0, 'a process that is gone has used nothing')
})

t.test('read and write calls of a process from /proc count each write; kernel CPU is a part of all CPU; no pid, no figure', async (t) => {
  t.ok(procAvailable(), 'this Linux has /proc/PID/stat')
  const devNull = openSync('/dev/null', 'w')
  const before = ioCalls(process.pid)
  for (let i = 0; i < 200; i++) writeSync(devNull, 'x')
  const after = ioCalls(process.pid)
  closeSync(devNull)
  t.ok(after - before >= 200, `200 writes are at least 200 more calls (${before} -> ${after})`)
  const system = systemMicros(process.pid)
  const all = cpuMicros(process.pid)
  t.ok(system >= 0 && system <= all, `kernel CPU ${system} µs is within all CPU ${all} µs`)
  t.equal(ioCalls(2 ** 22 + 12345), 0, 'a process that is gone made no calls')
  t.equal(systemMicros(2 ** 22 + 12345), 0, 'nor used kernel CPU')
  for (const figure of [cpuMicros, ioCalls, systemMicros]) t.ok(Number.isNaN(figure(undefined)), `${figure.name} without a pid is NaN, not 0`)
})

t.test('a process tree\'s CPU includes its descendants\'; a process is pinned to a core with taskset', async (t) => {
  // sh runs sh (not exec'd: the `; true` keeps the outer one waiting), whose loop burns some CPU before it sleeps.
  const inner = 'i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done; echo $$; exec sleep 30'
  const tree = spawn('sh', ['-c', `sh -c '${inner}'; true`], { stdio: ['ignore', 'pipe', 'inherit'] })
  const innerPids: number[] = []
  t.teardown(() => {
    tree.kill('SIGKILL')
    for (const pid of innerPids) {
      try { process.kill(pid, 'SIGKILL') } catch { /* gone already */ }
    }
  })
  const [line] = await once(tree.stdout, 'data') as [Buffer]
  const leaf = Number(line.toString().trim())
  innerPids.push(leaf)
  const leafCpu = cpuMicros(leaf)
  const treeCpu = cpuMicros(tree.pid)
  t.ok(leafCpu > 0, `the looping shell used CPU (${leafCpu} µs)`)
  t.ok(treeCpu >= leafCpu, `its parent's tree (${treeCpu} µs) counts it`)
  t.ok(ioCalls(tree.pid) >= ioCalls(leaf), 'and its calls')

  const bin = taskset()
  t.match(bin, /\/taskset$/, 'taskset is found on PATH')
  t.ok(pinProcess(leaf, '0'), 'the sleeping shell is pinned to core 0')
  t.match(execFileSync('taskset', ['-p', String(leaf)], { encoding: 'utf8' }), /affinity mask: 1$/m, 'the kernel says so')
  t.notOk(pinProcess(leaf, '64'), 'a core this machine does not have is refused: false, not a throw')
})
