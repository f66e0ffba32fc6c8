// A flood of distinct anonymous addresses must not reset a key's limit. A real gateway process
// (in-process store, as `npm start` runs it) holds a key at 429 for the day, then distinct
// anonymous clients arrive, 1.5× the anonymous table's bound each time, so a table shared with the
// keys would evict the key's state (it did: before the fix the key was admitted again):
// - 150,000 X-Forwarded-For addresses through a trusted proxy address (TRUST_PROXY=127.0.0.1)
//   against the default bound (ANONYMOUS_STATE_MAX=100,000); keep-alive, ~30 s here;
// - real TCP connections from distinct 127.x.y.z source addresses. One connection per address
//   cannot be kept alive and costs ~3× a proxied request, so this gateway runs with
//   ANONYMOUS_STATE_MAX=10,000 and gets SOCKET_FLOOD = 15,000 connections (1.5× as well): the same
//   eviction, in ~5–12 s instead of ~60 s or more on this 2-core machine.
// The key must still be 429 after each flood, and the anonymous table evicts only anonymous clients.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { Pool } from 'undici'
import { startBackend } from '../../helpers/backend.js'
import { bearer, DEMO_KEYS, plansYaml, REPO_CONFIG_DIR } from '../../helpers/gateway.js'
import { freePort, waitForHttp } from '../../helpers/ports.js'
import { runEntry } from '../../helpers/processes.js'

/** 1.5 × DEFAULT_ANONYMOUS_STATE_MAX: cycles a table of the default size completely. */
const XFF_FLOOD = 150_000
/** The socket flood's gateway keeps this many anonymous clients, and gets 1.5× as many connections. */
const SOCKET_STATE_MAX = 10_000
const SOCKET_FLOOD = 15_000
const FREE_PER_DAY = 3
const XFF_CONNECTIONS = 16
const SOCKET_CONCURRENCY = 64

/** The n-th distinct IPv4 address of the /8 `first` (n < 2^24). */
function addressOf (first: number, n: number): string {
  return `${first}.${(n >> 16) & 0xff}.${(n >> 8) & 0xff}.${n & 0xff}`
}

async function floodThroughProxy (origin: string, count: number): Promise<Map<number, number>> {
  const pool = new Pool(origin, { connections: XFF_CONNECTIONS, pipelining: 1 })
  const statuses = new Map<number, number>()
  let next = 0
  async function worker (): Promise<void> {
    while (next < count) {
      const n = next++
      const res = await pool.request({ path: '/v1/pets', method: 'GET', headers: { 'x-forwarded-for': addressOf(10, n) } })
      await res.body.dump()
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
    }
  }
  await Promise.all(Array.from({ length: XFF_CONNECTIONS * 4 }, worker))
  await pool.close()
  return statuses
}

/** One request per TCP connection, each from its own loopback source address (127.1.0.0 upwards). */
async function floodFromSockets (port: number, count: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>()
  let next = 0
  async function worker (): Promise<void> {
    while (next < count) {
      const status = await requestFrom(port, addressOf(127, (1 << 16) + next++))
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
    }
  }
  await Promise.all(Array.from({ length: SOCKET_CONCURRENCY }, worker))
  return statuses
}

/** The status of one anonymous request over its own connection from `localAddress`, and its X-RateLimit-Remaining. */
async function requestFromAddress (port: number, localAddress: string): Promise<{ status: number, remaining: string | undefined }> {
  return await new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress })
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { text += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve({ status: Number(text.slice(9, 12)), remaining: /x-ratelimit-remaining: (\d+)/i.exec(text)?.[1] }))
    socket.write('GET /v1/pets HTTP/1.1\r\nhost: gateway\r\nconnection: close\r\n\r\n')
  })
}

async function requestFrom (port: number, localAddress: string): Promise<number> {
  return await new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress })
    let head = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { if (head.length < 16) head += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve(Number(head.slice(9, 12))))
    socket.write('GET /v1/pets HTTP/1.1\r\nhost: gateway\r\nconnection: close\r\n\r\n')
  })
}

interface FloodTarget {
  origin: string
  port: number
  /** The free demo key's status and X-RateLimit-Remaining now. */
  keyStatus: () => Promise<{ status: number, remaining: string | null }>
}

/** A gateway process whose free plan allows FREE_PER_DAY a day, with the free demo key already at 429. */
async function gatewayWithKeyAt429 (t: Test, env: Record<string, string>): Promise<FloodTarget> {
  const backend = await startBackend(t)
  const dir = mkdtempSync(join(tmpdir(), 'edge-flood-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'plans.yaml'), plansYaml({ free: { perMinute: 1000, perDay: FREE_PER_DAY } }))
  for (const file of ['keys.yaml', 'routes.yaml']) writeFileSync(join(dir, file), readFileSync(join(REPO_CONFIG_DIR, file)))
  const [port, adminPort] = [await freePort(), await freePort()]
  runEntry(t, 'src/gateway/server.ts', {
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: String(port),
    ADMIN_PORT: String(adminPort),
    BACKEND_URL: backend.url,
    CONFIG_DIR: dir,
    CONFIG_WATCH: 'false',
    LOG_LEVEL: 'warn',
    ...env
  })
  await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`, 20_000)
  const origin = `http://127.0.0.1:${port}`
  const keyStatus = async (): Promise<{ status: number, remaining: string | null }> => {
    const res = await fetch(`${origin}/v1/pets`, { headers: bearer(DEMO_KEYS.free) })
    await res.arrayBuffer()
    return { status: res.status, remaining: res.headers.get('x-ratelimit-remaining') }
  }
  for (let i = 0; i < FREE_PER_DAY; i++) t.equal((await keyStatus()).status, 200)
  t.strictSame(await keyStatus(), { status: 429, remaining: '0' }, 'the key has used its day')
  return { origin, port, keyStatus }
}

t.test('X-Forwarded-For flood through a trusted proxy address', { timeout: 180_000 }, async (t) => {
  const gw = await gatewayWithKeyAt429(t, { TRUST_PROXY: '127.0.0.1' })
  const started = Date.now()
  const statuses = await floodThroughProxy(gw.origin, XFF_FLOOD)
  t.comment(`${XFF_FLOOD} X-Forwarded-For addresses in ${Date.now() - started} ms: ${JSON.stringify([...statuses])}`)
  t.equal(statuses.get(401), XFF_FLOOD, 'every flooding request was counted as its own anonymous client (401, none limited)')
  t.strictSame(await gw.keyStatus(), { status: 429, remaining: '0' }, 'still 429 after the flood')
  const res = await fetch(`${gw.origin}/v1/pets`, { headers: { 'x-forwarded-for': addressOf(10, XFF_FLOOD - 1) } })
  await res.arrayBuffer()
  t.equal(res.headers.get('x-ratelimit-remaining'), '28', 'a recent anonymous client is still counted (its second request)')
})

t.test('flood of TCP connections from distinct source addresses', { timeout: 180_000 }, async (t) => {
  const gw = await gatewayWithKeyAt429(t, { ANONYMOUS_STATE_MAX: String(SOCKET_STATE_MAX) })
  const started = Date.now()
  const statuses = await floodFromSockets(gw.port, SOCKET_FLOOD)
  t.comment(`${SOCKET_FLOOD} source addresses in ${Date.now() - started} ms: ${JSON.stringify([...statuses])}`)
  t.equal(statuses.get(401), SOCKET_FLOOD, 'every connection was its own anonymous client')
  t.strictSame(await gw.keyStatus(), { status: 429, remaining: '0' }, 'still 429 after the flood')
  const last = await requestFromAddress(gw.port, addressOf(127, (1 << 16) + SOCKET_FLOOD - 1))
  t.strictSame(last, { status: 401, remaining: '28' }, 'the most recent anonymous client is still counted')
  const first = await requestFromAddress(gw.port, addressOf(127, 1 << 16))
  t.strictSame(first, { status: 401, remaining: '29' }, 'the least recent one was evicted from the full anonymous table: a fresh window')
})
