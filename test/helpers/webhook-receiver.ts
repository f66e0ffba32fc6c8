// A webhook receiver for the tests, verifying every delivery with the `standardwebhooks` package (what
// a customer runs), on a loopback port. It answers 204 when up, 503 when down, and holds a request
// without answering when told to (a delivery in flight); it records each verified delivery.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Test } from 'tap'
import { Webhook } from 'standardwebhooks'

export interface Delivery {
  id: string
  type: string
  data: Record<string, unknown>
  signature: string
}

export interface Receiver {
  url: string
  /** Verified deliveries answered 2xx, in order. */
  delivered: Delivery[]
  /** Attempts seen, answered or not, verified or not. */
  attempts: number
  /** The webhook-id of each attempt seen, in order. */
  attemptIds: string[]
  /** Attempts whose signature did not verify. */
  refused: number
  mode: 'up' | 'down' | 'hold'
  /** Resolves at the next attempt received. */
  nextAttempt: () => Promise<void>
  close: () => Promise<void>
}

/** A fresh `whsec_` secret. */
export function newSecret (fill = 7): string {
  return `whsec_${Buffer.alloc(32, fill).toString('base64')}`
}

export async function startReceiver (t: Pick<Test, 'teardown'>, secret: string, path = '/hooks'): Promise<Receiver> {
  const verifier = new Webhook(secret)
  const held: ServerResponse[] = []
  let waiters: Array<() => void> = []
  const receiver: Receiver = {
    url: '',
    delivered: [],
    attempts: 0,
    attemptIds: [],
    refused: 0,
    mode: 'up',
    nextAttempt: async () => await new Promise<void>((resolve) => { waiters.push(resolve) }),
    close: async () => {}
  }
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      receiver.attempts++
      receiver.attemptIds.push(String(req.headers['webhook-id']))
      const wake = waiters
      waiters = []
      for (const resolve of wake) resolve()
      if (req.url !== path) { res.writeHead(404).end(); return }
      if (receiver.mode === 'hold') { held.push(res); return }
      if (receiver.mode === 'down') { res.writeHead(503).end('down'); return }
      const body = Buffer.concat(chunks).toString('utf8')
      const headers = { 'webhook-id': String(req.headers['webhook-id']), 'webhook-timestamp': String(req.headers['webhook-timestamp']), 'webhook-signature': String(req.headers['webhook-signature']) }
      try {
        const payload = verifier.verify(body, headers) as { type: string, data: Record<string, unknown> }
        receiver.delivered.push({ id: headers['webhook-id'], type: payload.type, data: payload.data, signature: headers['webhook-signature'] })
        res.writeHead(204).end()
      } catch {
        receiver.refused++
        res.writeHead(400).end('bad signature')
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  receiver.url = `http://127.0.0.1:${(server.address() as { port: number }).port}${path}`
  receiver.close = async () => {
    for (const res of held) res.destroy()
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  t.teardown(receiver.close)
  return receiver
}

/** webhooks.yaml with one endpoint `hooks` at `url`, its secret from env `secretEnv`. */
export function webhooksYaml (url: string, secretEnv: string, extra = ''): string {
  return [
    'endpoints:',
    '  - name: hooks',
    `    url: ${url}`,
    '    events: [quota.threshold, quota.exceeded, key.banned, key.expiring]',
    `    secret: { env: ${secretEnv} }`,
    extra
  ].join('\n')
}
