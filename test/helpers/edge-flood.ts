// Floods of distinct anonymous clients against a real gateway process (test/gateway/edge/anonymous-flood-*):
// the gateway with a key held at 429, and two ways to be many clients — X-Forwarded-For addresses
// through a trusted proxy on keep-alive connections, and one TCP connection per loopback source address.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect, isIPv6 } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { Pool } from 'undici'
import { startBackend } from './backend.js'
import { bearer, DEMO_KEYS, plansYaml, FIXTURE_CONFIG_DIR } from './config-fixture.js'
import { freePort, waitForHttp } from './ports.js'
import { runEntry } from './processes.js'

const FREE_PER_DAY = 3
const XFF_CONNECTIONS = 16
const SOCKET_CONCURRENCY = 64

/** The n-th distinct IPv4 address of the /8 `first` (n < 2^24). */
export function addressOf (first: number, n: number): string {
  return `${first}.${(n >> 16) & 0xff}.${(n >> 8) & 0xff}.${n & 0xff}`
}

export async function floodThroughProxy (origin: string, count: number): Promise<Map<number, number>> {
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
export async function floodFromSockets (port: number, count: number): Promise<Map<number, number>> {
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

/** The status of one anonymous request to `host` over its own connection from `localAddress`, and its X-RateLimit-Remaining. */
export async function requestFromAddress (port: number, localAddress: string, host = '127.0.0.1'): Promise<{ status: number, remaining: string | undefined }> {
  return await new Promise((resolve, reject) => {
    const socket = connect({ host, port, localAddress, ...(isIPv6(host) ? { family: 6 } : {}) })
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

export interface FloodTarget {
  origin: string
  port: number
  /** The free demo key's status and X-RateLimit-Remaining now. */
  keyStatus: () => Promise<{ status: number, remaining: string | null }>
}

/** A gateway process whose free plan allows FREE_PER_DAY a day, with the free demo key already at 429. */
export async function gatewayWithKeyAt429 (t: Test, env: Record<string, string>): Promise<FloodTarget> {
  const backend = await startBackend(t)
  const dir = mkdtempSync(join(tmpdir(), 'edge-flood-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // perDay ≥ perMinute is a config rule: both windows hold FREE_PER_DAY, and the day's stays full.
  writeFileSync(join(dir, 'plans.yaml'), plansYaml({ free: { perMinute: FREE_PER_DAY, perDay: FREE_PER_DAY } }))
  for (const file of ['keys.yaml', 'routes.yaml']) writeFileSync(join(dir, file), readFileSync(join(FIXTURE_CONFIG_DIR, file)))
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

