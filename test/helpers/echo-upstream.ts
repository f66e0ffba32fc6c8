// A real HTTP server standing in for the backend where a test must see exactly what the gateway
// forwarded (headers, body) or make the upstream misbehave (slow, reset, garbage).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Test } from 'tap'

export interface ReceivedRequest {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: string
}

export type UpstreamBehaviour = (req: IncomingMessage, res: ServerResponse, body: string) => void

export interface EchoUpstream {
  url: string
  received: ReceivedRequest[]
  behave: (fn: UpstreamBehaviour) => void
}

const echo: UpstreamBehaviour = (req, res, body) => {
  res.writeHead(200, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }))
}

export async function startEchoUpstream (t: Test): Promise<EchoUpstream> {
  const received: ReceivedRequest[] = []
  let behaviour = echo
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString()
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body })
      behaviour(req, res, body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  const { port } = server.address() as { port: number }
  return { url: `http://127.0.0.1:${port}`, received, behave: (fn) => { behaviour = fn } }
}

/** A held upstream: its requests wait until `releaseOne()` (the oldest) or `release()` (all, and every later one at once). */
export interface HeldUpstream extends EchoUpstream {
  releaseOne: () => void
  release: () => void
}

/** An upstream that holds every request until released, then answers `[]`: admitted requests stay in flight as long as a test needs. */
export async function startHeldUpstream (t: Test): Promise<HeldUpstream> {
  const upstream = await startEchoUpstream(t)
  const held: Array<() => void> = []
  let released = false
  upstream.behave((_req, res) => {
    const answer = (): void => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('[]') }
    if (released) answer(); else held.push(answer)
  })
  const release = (): void => { released = true; for (const answer of held.splice(0)) answer() }
  t.teardown(release)
  return Object.assign(upstream, { releaseOne: () => { held.shift()?.() }, release })
}
