// Raw keep-alive HTTP/1.1 connections from a chosen source address (127.x.y.z, or an IPv6 address
// routed to lo), for the connection-cap tests and the connection-flood bench: each sends requests
// one at a time, reads every response whole (Content-Length framing) and stays open until the
// server closes it — so a test can see which connections the server kept and which it closed.
import { connect, isIPv6, type Socket } from 'node:net'

export interface RawResponse {
  status: number
  /** Header names lower-cased; a repeated header keeps its last value. */
  headers: Record<string, string>
}

export interface KeptAlive {
  readonly localAddress: string
  readonly socket: Socket
  /** True once the connection is closed, by either side. */
  readonly closed: boolean
  /** Resolves when the connection closes. */
  readonly whenClosed: Promise<void>
  /** Sends one request (GET /v1/pets unless `head` is given: request line and headers, no blank line). */
  send: (head?: string, body?: string) => Promise<RawResponse>
  /** Writes bytes without waiting for an answer (a request that stays in flight). */
  write: (text: string) => void
  destroy: () => void
}

export interface KeptAliveTarget {
  port: number
  /** Where the gateway listens; default 127.0.0.1. */
  host?: string
}

function parseHead (head: string): RawResponse {
  const [statusLine = '', ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return { status: Number(statusLine.slice(9, 12)), headers }
}

/** Opens a connection from `localAddress`; resolves once connected (the server may still close it at once). */
export async function openKeptAlive (target: KeptAliveTarget, localAddress: string): Promise<KeptAlive> {
  const host = target.host ?? '127.0.0.1'
  const socket = connect({ host, port: target.port, localAddress, ...(isIPv6(host) ? { family: 6 } : {}) })
  socket.setEncoding('latin1')
  let buffer = ''
  let closed = false
  let waiting: { resolve: (r: RawResponse) => void, reject: (e: Error) => void } | undefined
  const whenClosed = new Promise<void>((resolve) => socket.once('close', () => {
    closed = true
    waiting?.reject(new Error(`connection from ${localAddress} closed before a response`))
    waiting = undefined
    resolve()
  }))
  function drain (): void {
    const end = buffer.indexOf('\r\n\r\n')
    if (waiting === undefined || end === -1) return
    const response = parseHead(buffer.slice(0, end))
    const length = Number(response.headers['content-length'] ?? 0)
    if (buffer.length < end + 4 + length) return
    buffer = buffer.slice(end + 4 + length)
    const { resolve } = waiting
    waiting = undefined
    resolve(response)
  }
  socket.on('data', (chunk: string) => { buffer += chunk; drain() })
  socket.on('error', () => {}) // a refused or reclaimed connection ends in 'close' either way
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('close', () => reject(new Error(`connection from ${localAddress} failed`)))
  })
  return {
    localAddress,
    socket,
    get closed () { return closed },
    whenClosed,
    async send (head = 'GET /v1/pets HTTP/1.1\r\nhost: gateway', body = '') {
      if (closed) throw new Error(`connection from ${localAddress} is closed`)
      const response = new Promise<RawResponse>((resolve, reject) => { waiting = { resolve, reject } })
      socket.write(`${head}\r\n\r\n${body}`)
      return await response
    },
    write: (text) => { socket.write(text) },
    destroy: () => { socket.destroy() }
  }
}

/** Opens `count` connections one after another from `localAddress`, each answering one request; the refused ones are left out. */
export async function openAnswered (target: KeptAliveTarget, localAddress: string, count: number): Promise<KeptAlive[]> {
  const open: KeptAlive[] = []
  for (let i = 0; i < count; i++) {
    const connection = await openKeptAlive(target, localAddress)
    try {
      await connection.send()
      open.push(connection)
    } catch {
      connection.destroy()
    }
  }
  return open
}
