// `webhooks test`, `webhooks dead-letters` and `webhooks replay`. `test` reads the config directory
// (webhooks.yaml, its secrets from the environment or secret files, as the gateway does) and sends
// each endpoint, or the one named, a signed test event from this machine, the way the gateway
// delivers (same signing, timeouts, no redirects): the check after adding an endpoint. The dead
// letters are read and replayed through a running gateway's admin API.
import { randomUUID } from 'node:crypto'
import { parseArgs } from 'node:util'
import { loadConfigDir } from '../gateway/config/read-files.js'
import { eventBody, testEvent } from '../gateway/webhooks/events.js'
import { createSender } from '../gateway/webhooks/http.js'
import { webhookHeaders } from '../gateway/webhooks/sign.js'
import { adminCall, adminTarget } from './admin-client.js'
import { CommandError, UsageError } from './errors.js'

type Out = (line: string) => void

interface LetterView { id: string, endpoint: string, type: string, attempts: number, deadAt: string, lastError: string }

async function sendTest (args: string[], out: Out): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { config: { type: 'string' } } })
  if (positionals.length > 1) throw new UsageError('webhooks test takes at most one endpoint name')
  const snapshot = loadConfigDir(values.config ?? process.env.CONFIG_DIR ?? './config')
  const endpoints = snapshot.webhooks?.endpoints ?? []
  const name = positionals[0]
  const chosen = name === undefined ? endpoints : endpoints.filter((e) => e.name === name)
  if (chosen.length === 0) {
    throw new CommandError(name === undefined ? 'no webhook endpoints in webhooks.yaml' : `no endpoint "${name}" in webhooks.yaml (known: ${endpoints.map((e) => e.name).join(', ') || 'none'})`)
  }
  const sender = createSender()
  let failed = 0
  try {
    for (const endpoint of chosen) {
      const event = testEvent(endpoint.name, Date.now(), randomUUID())
      const body = eventBody(event)
      const outcome = await sender.send(endpoint.url, webhookHeaders(endpoint.secrets, event.id, Date.now(), body), body)
      if (outcome.ok) out(`${endpoint.name}: delivered (${outcome.status}), webhook-id ${event.id}, ${endpoint.secrets.length} signature${endpoint.secrets.length === 1 ? '' : 's'}`)
      else {
        failed++
        out(`${endpoint.name}: not delivered (${outcome.error}), webhook-id ${event.id}`)
      }
    }
  } finally {
    await sender.close()
  }
  if (failed > 0) throw new CommandError(`${failed} of ${chosen.length} endpoint${chosen.length === 1 ? '' : 's'} did not accept the test event`)
  return 0
}

async function deadLetters (args: string[], out: Out): Promise<number> {
  const { values } = parseArgs({ args, options: { admin: { type: 'string' }, json: { type: 'boolean' } } })
  const body = await adminCall(adminTarget(values.admin), 'GET', '/admin/webhooks/dead-letters')
  const letters = body.deadLetters as LetterView[]
  if (values.json === true) {
    out(JSON.stringify(letters, null, 2))
    return 0
  }
  if (letters.length === 0) out('no dead letters')
  for (const letter of letters) out(`${letter.id}\t${letter.type}\t${letter.endpoint}\t${letter.attempts} attempts\tdead ${letter.deadAt}\t${letter.lastError}`)
  return 0
}

async function replay (args: string[], out: Out): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { admin: { type: 'string' } } })
  const [id, ...extra] = positionals
  if (id === undefined || extra.length > 0) throw new UsageError('webhooks replay needs one webhook-id (msg_…) or "all"')
  if (!/^(msg_[A-Za-z0-9_-]{1,64}|all)$/.test(id)) throw new CommandError(`"${id}" is not a webhook-id (msg_…) or "all"`)
  const body = await adminCall(adminTarget(values.admin), 'POST', `/admin/webhooks/dead-letters/${id}/replay`)
  out(`${String(body.replayed)} dead letter${body.replayed === 1 ? '' : 's'} queued again`)
  return 0
}

export async function webhooks (sub: 'test' | 'dead-letters' | 'replay', args: string[], out: Out): Promise<number> {
  if (sub === 'test') return await sendTest(args, out)
  if (sub === 'dead-letters') return await deadLetters(args, out)
  return await replay(args, out)
}
