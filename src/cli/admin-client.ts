// The command line's way into a running gateway: its admin API (GET/POST on the admin port, the
// ADMIN_TOKEN as bearer). Every failure becomes one CommandError line an operator can act on —
// gateway not running, wrong port, token missing or wrong, unknown id — instead of a stack trace.
import { CommandError, UsageError } from './errors.js'

export const DEFAULT_ADMIN_URL = 'http://127.0.0.1:9091'
export const DEFAULT_ADMIN_TIMEOUT_MS = 5_000

export interface AdminTarget {
  /** Base URL of the admin port, e.g. http://127.0.0.1:9091. */
  url: string
  /** ADMIN_TOKEN, sent as `Authorization: Bearer …` when set. */
  token: string | undefined
  timeoutMs?: number
}

function reason (err: unknown): string {
  const cause = (err as { cause?: { code?: string, message?: string } }).cause
  if (err instanceof Error && err.name === 'TimeoutError') return 'no answer in time'
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err))
}

/** Calls the admin API and returns its JSON body; throws CommandError on anything but 2xx. */
export async function adminCall (target: AdminTarget, method: 'GET' | 'POST' | 'DELETE', path: string): Promise<Record<string, unknown>> {
  let url: URL
  try {
    url = new URL(path, target.url)
  } catch {
    throw new CommandError(`--admin must be a URL like ${DEFAULT_ADMIN_URL}, got "${target.url}"`)
  }
  const headers: Record<string, string> = target.token === undefined || target.token === '' ? {} : { authorization: `Bearer ${target.token}` }
  // The admin app refuses a state-changing request that is not JSON (a browser's cross-origin form post).
  if (method !== 'GET') headers['content-type'] = 'application/json'
  let res: Response
  try {
    res = await fetch(url, {
      method,
      headers,
      signal: AbortSignal.timeout(target.timeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS)
    })
  } catch (err) {
    throw new CommandError(`cannot reach the gateway's admin API at ${url.origin} (${reason(err)}): is the gateway running? Point --admin at its admin port.`)
  }
  const text = await res.text()
  let body: Record<string, unknown> = {}
  try {
    body = JSON.parse(text) as Record<string, unknown>
  } catch {
    if (res.ok) throw new CommandError(`${url.origin} did not answer JSON: is --admin the gateway's admin port?`)
  }
  if (res.status === 401) throw new CommandError(`the admin API at ${url.origin} refused the request: set ADMIN_TOKEN to the gateway's admin token`)
  if (!res.ok) throw new CommandError(typeof body.message === 'string' ? body.message : `admin API answered ${res.status}`)
  return body
}

/** Where an admin command goes: `--admin URL` (default DEFAULT_ADMIN_URL), with ADMIN_TOKEN from the environment. */
export function adminTarget (admin: string | undefined): AdminTarget {
  return { url: admin ?? DEFAULT_ADMIN_URL, token: process.env.ADMIN_TOKEN }
}

/** The one key or consumer id an admin command takes, checked before it goes into a URL. */
export function oneId (positionals: string[], command: string): string {
  const [id, ...extra] = positionals
  if (id === undefined || extra.length > 0) throw new UsageError(`${command} needs exactly one id`)
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(id)) throw new CommandError(`"${id}" is not a key or consumer id (letters, digits, . _ -, at most 64)`)
  return id
}
