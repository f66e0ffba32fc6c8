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
