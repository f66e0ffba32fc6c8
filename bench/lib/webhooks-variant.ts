// BENCH_WEBHOOKS=1: the gateway on Redis once more, with an endpoint in webhooks.yaml, so the table shows
// what configuring webhooks costs the request path (the onResponse check of each decision; detection at
// the history's flushes and delivery run off it). The endpoint is a receiver in this process that answers
// 204 at once; the bench's plans are never exhausted, so it is rarely called: what is measured is the
// cost of having webhooks on, not of delivering.
import { cpSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { randomBytes } from 'node:crypto'

export interface WebhooksVariant {
  readonly name: string
  readonly env: Record<string, string>
  readonly close: () => Promise<void>
}

/** A copy of `configDir` with one endpoint (every event) at a loopback receiver, and the env that points a gateway at it. */
export async function webhooksVariant (configDir: string): Promise<WebhooksVariant> {
  const receiver: Server = createServer((request, response) => {
    request.resume()
    request.on('end', () => response.writeHead(204).end())
  })
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
  const address = receiver.address()
  if (address === null || typeof address === 'string') throw new Error('webhook receiver: no port')
  const withWebhooks = `${configDir}-webhooks`
  cpSync(configDir, withWebhooks, { recursive: true })
  writeFileSync(`${withWebhooks}/webhooks.yaml`, [
    'endpoints:',
    '  - name: bench',
    `    url: http://127.0.0.1:${address.port}/hooks`,
    '    events: [quota.threshold, quota.exceeded, key.banned, key.expiring]',
    '    secret: { env: WEBHOOK_BENCH_SECRET }',
    ''
  ].join('\n'))
  return {
    name: 'webhooks on',
    env: { CONFIG_DIR: withWebhooks, WEBHOOK_BENCH_SECRET: `whsec_${randomBytes(24).toString('base64')}` },
    close: async () => { await new Promise<void>((resolve) => receiver.close(() => resolve())) }
  }
}
