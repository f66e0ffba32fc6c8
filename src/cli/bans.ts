// `bans list` and `bans lift`: through a running gateway's admin API (the one way that resolves
// credential ids, drops every gateway's ban cache and writes the audit line), or — for scripts
// written before the admin API — straight on Redis when REDIS_URL (or a Cluster / Sentinel) is set
// and no `--admin` is given. Lifting a ban that is not there is not a failure: the consumer is
// unbanned either way, so the command says so and exits 0 (issue 33: it used to exit 1).
import { parseArgs } from 'node:util'
import { createStore } from '../gateway/limiter/create-store.js'
import { settingsFromEnv } from '../gateway/runtime/settings.js'
import { adminCall, adminTarget, oneId } from './admin-client.js'
import { CommandError, UsageError } from './errors.js'

type Out = (line: string) => void

interface BanView { keyId: string, until: string, secondsLeft: number }

/** What `bans lift` says of an id with no ban in force. */
export function notBanned (id: string): string {
  return `${id} is not banned: no ban to lift`
}

async function bansViaAdmin (sub: 'list' | 'lift', args: string[], out: Out): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { admin: { type: 'string' } } })
  const target = adminTarget(values.admin)
  if (sub === 'list') {
    const { bans: list } = await adminCall(target, 'GET', '/admin/bans') as unknown as { bans: BanView[] }
    if (list.length === 0) out('no bans in force')
    for (const ban of list) out(`${ban.keyId}\tuntil ${ban.until}\t(${ban.secondsLeft} s left)`)
    return 0
  }
  const id = oneId(positionals, 'bans lift')
  try {
    const body = await adminCall(target, 'DELETE', `/admin/bans/${id}`)
    out(`ban on ${String(body.consumerId ?? id)} lifted`)
    return 0
  } catch (err) {
    // The admin API answers 404 "Key … is not banned": nothing to lift, which is what was asked.
    if (err instanceof CommandError && err.message.endsWith('is not banned')) { out(notBanned(id)); return 0 }
    throw err
  }
}

export async function bans (sub: 'list' | 'lift', args: string[], out: Out): Promise<number> {
  const settings = settingsFromEnv()
  const redisConfigured = settings.redisUrl !== undefined || settings.redisClusterNodes !== undefined || settings.redisSentinels !== undefined
  // The admin API is the one way in; reading Redis directly stays for scripts written before it
  // (REDIS_URL set, no --admin). Store ids there are consumer ids.
  if (!redisConfigured || args.some((a) => a === '--admin' || a.startsWith('--admin='))) return await bansViaAdmin(sub, args, out)
  const store = await createStore(settings)
  try {
    if (sub === 'list') {
      const list = await store.admin.listBans()
      if (list.length === 0) out('no bans in force')
      const now = Date.now()
      for (const ban of list.sort((a, b) => a.until - b.until)) {
        out(`${ban.id}\tuntil ${new Date(ban.until).toISOString()}\t(${Math.ceil((ban.until - now) / 1000)} s left)`)
      }
      return 0
    }
    const id = args[0]
    if (id === undefined) throw new UsageError('bans lift needs a key id')
    const lifted = await store.admin.liftBan(id)
    out(lifted ? `ban on ${id} lifted` : notBanned(id))
    return 0
  } finally {
    await store.close()
  }
}
