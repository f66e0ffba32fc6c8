#!/usr/bin/env node
// `petstore-gateway`: the operator's command line — create, hash and rotate keys (edits of the
// config directory), check a config directory before shipping it, and inspect or reset a consumer
// and list or lift bans on a running gateway through its admin API; send a signed test webhook, and
// read or replay the webhooks' dead letters.
import '../shared/runtime-guard.js'
import { readFileSync, realpathSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { keyDigest } from '../gateway/auth/bearer.js'
import { ConfigError, parseConfig } from '../gateway/config/loader.js'
import { loadConfigOnce } from '../gateway/config/provider.js'
import { DEFAULT_CONFIG_DIR, loadConfigDir, readConfigTexts } from '../gateway/config/read-files.js'
import type { Limits } from '../gateway/config/types.js'
import { settingsFromEnv } from '../gateway/runtime/settings.js'
import { adminCall, adminTarget, oneId } from './admin-client.js'
import { bans } from './bans.js'
import { storeExpireLeaked } from './store.js'
import { webhooks } from './webhooks.js'
import { writeFileAtomic } from './atomic-write.js'
import { CommandError, UsageError } from './errors.js'
import { formatConsumer, formatReset } from './format-consumer.js'
import { formatShadow, formatUsage, formatUsageDays, usageCsv } from './format-history.js'
import { generateKey } from './key-material.js'
import { plansDiff, type RunningConfig } from './plans-diff.js'
import { DEFAULT_GRACE, isoSeconds, parseGrace, rotateKeysText } from './rotate.js'
import { COMMANDS, commandUsage, groupUsage, PROGRAM, usage, type CommandHelp } from './usage.js'

type Out = (line: string) => void

/** Days of usage history `keys show` ends with (today and the days before it). */
const SHOW_USAGE_DAYS = 7

function positiveInt (name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer, got "${raw}"`)
  return n
}

function keysCreate (args: string[], out: Out): number {
  const { values } = parseArgs({
    args,
    options: { id: { type: 'string' }, plan: { type: 'string' }, 'per-minute': { type: 'string' }, 'per-day': { type: 'string' }, config: { type: 'string' } }
  })
  const id = values.id
  const plan = values.plan
  if (id === undefined || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(id)) throw new UsageError('--id is required: letters, digits, . _ - (at most 64)')
  if (plan === undefined) throw new UsageError('--plan is required')
  const perMinute = positiveInt('per-minute', values['per-minute'])
  const perDay = positiveInt('per-day', values['per-day'])
  if ((perMinute === undefined) !== (perDay === undefined)) throw new UsageError('--per-minute and --per-day go together')

  const snapshot = loadConfigDir(values.config ?? process.env.CONFIG_DIR ?? './config')
  if (!snapshot.plans.has(plan)) throw new CommandError(`unknown plan "${plan}" (known: ${[...snapshot.plans.keys()].join(', ')})`)
  if (snapshot.plans.get(plan) === undefined && perMinute === undefined) throw new UsageError(`plan "${plan}" is custom: give --per-minute and --per-day`)
  if (snapshot.keysById.has(id)) throw new CommandError(`a key with id "${id}" already exists`)

  const key = generateKey()
  out(`API key (shown once, store it now): ${key}`)
  out('')
  out('keys.yaml entry:')
  out(`  - id: ${id}`)
  out(`    sha256: ${keyDigest(key)}`)
  out(`    plan: ${plan}`)
  if (perMinute !== undefined) out(`    limits: { perMinute: ${perMinute}, perDay: ${perDay ?? 0} }`)
  return 0
}

function keysRotate (args: string[], out: Out): number {
  const { values } = parseArgs({ args, options: { id: { type: 'string' }, grace: { type: 'string' }, config: { type: 'string' } } })
  const id = values.id
  if (id === undefined || id === '') throw new CommandError('keys rotate needs --id ID (the key to replace)')
  const graceMs = parseGrace(values.grace ?? DEFAULT_GRACE)
  const dir = values.config ?? process.env.CONFIG_DIR ?? './config'
  const texts = readConfigTexts(dir)
  parseConfig(texts) // a config that does not load now is fixed first, not rotated

  const key = generateKey()
  const rotated = rotateKeysText(texts['keys.yaml'], { id, sha256: keyDigest(key), graceMs, now: Date.now() })
  try {
    parseConfig({ ...texts, 'keys.yaml': rotated.text })
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    throw new CommandError(`the rotated keys.yaml would not load, nothing written: ${err.problems.join('; ')}`)
  }
  writeFileAtomic(join(dir, 'keys.yaml'), rotated.text)
  out(`API key (shown once, store it now): ${key}`)
  out('')
  out(`keys.yaml: added "${rotated.newId}" for consumer "${rotated.consumerId}" (same plan, limits and scopes)`)
  out(`keys.yaml: "${id}" expires at ${isoSeconds(rotated.oldExpiresAt)}; both keys share the consumer's windows until then`)
  return 0
}

async function keysShow (args: string[], out: Out): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { admin: { type: 'string' }, json: { type: 'boolean' } } })
  const id = oneId(positionals, 'keys show')
  const target = adminTarget(values.admin)
  const body = await adminCall(target, 'GET', `/admin/consumers/${id}`)
  if (values.json === true) {
    out(JSON.stringify(body, null, 2))
    return 0
  }
  for (const line of formatConsumer(body)) out(line)
  // The gateway's days (its clock, not this machine's): the default range, of which the last few.
  try {
    const usage = await adminCall(target, 'GET', `/admin/consumers/${id}/usage`)
    for (const line of formatUsageDays(usage, SHOW_USAGE_DAYS)) out(line)
  } catch (err) {
    // The consumer was shown; a gateway without the history (older) or a store that does not answer says so in one line.
    if (!(err instanceof CommandError)) throw err
    out(`usage by UTC day: not available (${err.message})`)
  }
  return 0
}

const DATE = /^\d{4}-\d{2}-\d{2}$/

async function keysUsage (args: string[], out: Out): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { admin: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, csv: { type: 'boolean' }, json: { type: 'boolean' } }
  })
  const id = oneId(positionals, 'keys usage')
  const query = new URLSearchParams()
  for (const name of ['from', 'to'] as const) {
    const value = values[name]
    if (value === undefined) continue
    if (!DATE.test(value)) throw new UsageError(`--${name} must be a UTC date YYYY-MM-DD, got "${value}"`)
    query.set(name, value)
  }
  const search = query.size === 0 ? '' : `?${query.toString()}`
  const body = await adminCall(adminTarget(values.admin), 'GET', `/admin/consumers/${id}/usage${search}`)
  const lines = values.json === true ? [JSON.stringify(body, null, 2)] : values.csv === true ? usageCsv(body) : formatUsage(body)
  for (const line of lines) out(line)
  return 0
}

async function plansShadow (args: string[], out: Out): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { admin: { type: 'string' }, top: { type: 'string' }, json: { type: 'boolean' } } })
  const [plan, ...extra] = positionals
  if (plan === undefined || extra.length > 0) throw new UsageError('plans shadow needs exactly one plan')
  const top = positiveInt('top', values.top)
  const body = await adminCall(adminTarget(values.admin), 'GET', `/admin/plans/${encodeURIComponent(plan)}/shadow${top === undefined ? '' : `?top=${top}`}`)
  const lines = values.json === true ? [JSON.stringify(body, null, 2)] : formatShadow(body)
  for (const line of lines) out(line)
  return 0
}

async function keysReset (args: string[], out: Out): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { admin: { type: 'string' } } })
  const id = oneId(positionals, 'keys reset')
  const body = await adminCall(adminTarget(values.admin), 'POST', `/admin/consumers/${id}/reset`)
  out(formatReset(body))
  return 0
}

function keysHash (args: string[], out: Out): number {
  const key = args[0] ?? readFileSync(0, 'utf8').split('\n', 1)[0]?.trim() ?? ''
  if (key === '') throw new UsageError('give the key as an argument or on stdin')
  out(keyDigest(key))
  return 0
}

/** `plans diff DIR`: DIR loaded as the gateway would load it, against the config in force (plans-diff.ts). */
async function plansDiffCommand (args: string[], out: Out): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { admin: { type: 'string' } } })
  const [dir, ...extra] = positionals
  if (dir === undefined || extra.length > 0) throw new UsageError('plans diff needs exactly one config directory')
  const next = await loadConfigOnce({ dir, maxBytes: settingsFromEnv().configMaxBytes, now: Date.now })
  const target = adminTarget(values.admin)
  const running = await adminCall(target, 'GET', '/admin/config') as RunningConfig
  const { lines, changed } = await plansDiff(running, next, async (id) => {
    try {
      return (await adminCall(target, 'GET', `/admin/consumers/${id}`)).limits as Limits
    } catch (e) {
      if (e instanceof CommandError && e.message.startsWith('No consumer or key')) return undefined
      throw e
    }
  })
  out(`${dir} against the running gateway (config version ${running.version ?? '?'}):`)
  for (const line of lines) out(line)
  if (!changed) out('no limit changes')
  return 0
}

/** Loads the directory as the gateway does at start-up and on every reload (config/provider.ts), so it reports the same problems. */
async function configCheck (args: string[], out: Out, err: Out): Promise<number> {
  const dir = args[0] ?? process.env.CONFIG_DIR ?? DEFAULT_CONFIG_DIR
  try {
    const snapshot = await loadConfigOnce({ dir, maxBytes: settingsFromEnv().configMaxBytes, now: Date.now })
    out(`${dir}: ok (version ${snapshot.version}, ${snapshot.plans.size} plans, ${snapshot.keysById.size} keys, ${snapshot.routes.length} routes)`)
    return 0
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e
    for (const problem of e.problems) err(problem)
    return 1
  }
}

type Handler = (args: string[], out: Out, err: Out) => number | Promise<number>

const HANDLERS: Readonly<Record<string, Handler>> = {
  'keys create': (args, out) => keysCreate(args, out),
  'keys rotate': (args, out) => keysRotate(args, out),
  'keys hash': (args, out) => keysHash(args, out),
  'keys show': async (args, out) => await keysShow(args, out),
  'keys reset': async (args, out) => await keysReset(args, out),
  'keys usage': async (args, out) => await keysUsage(args, out),
  'plans shadow': async (args, out) => await plansShadow(args, out),
  'plans diff': async (args, out) => await plansDiffCommand(args, out),
  'config check': (args, out, err) => configCheck(args, out, err),
  'bans list': async (args, out) => await bans('list', args, out),
  'bans lift': async (args, out) => await bans('lift', args, out),
  'store expire-leaked': async (args, out) => await storeExpireLeaked(args, out),
  'webhooks test': async (args, out) => await webhooks('test', args, out),
  'webhooks dead-letters': async (args, out) => await webhooks('dead-letters', args, out),
  'webhooks replay': async (args, out) => await webhooks('replay', args, out)
}

const HELP_FLAGS = new Set(['--help', '-h'])

/** The command `argv` names, or the one line that says why there is none. */
function findCommand (group: string, sub: string | undefined): CommandHelp {
  const command = COMMANDS.find((c) => c.name === `${group} ${sub ?? ''}`)
  if (command !== undefined) return command
  const inGroup = COMMANDS.filter((c) => c.name.startsWith(`${group} `)).map((c) => c.name.slice(group.length + 1))
  if (inGroup.length === 0) throw new CommandError(`unknown command "${group}" (${PROGRAM} --help lists the commands)`)
  if (sub === undefined) throw new CommandError(`${group} needs a command: ${inGroup.join(', ')} (${PROGRAM} ${group} --help)`)
  throw new CommandError(`unknown command "${group} ${sub}" (${PROGRAM} ${group} --help lists its commands)`)
}

/** Node's parseArgs errors, reworded as one line that names the command. */
function parseArgsMessage (e: TypeError & { code: string }, command: string): string {
  const option = /'(-[^' ]*)/.exec(e.message)?.[1]
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option !== undefined) return `${command}: unknown option ${option}`
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option !== undefined) {
    return `${command}: ${option} ${e.message.includes('does not take an argument') ? 'takes no value' : 'needs a value'}`
  }
  const positional = /argument '([^']*)'/.exec(e.message)?.[1]
  if (e.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL' && positional !== undefined) return `${command}: unexpected argument "${positional}"`
  return `${command}: ${e.message.split('. ')[0] ?? e.message}`
}

function isParseArgsError (e: unknown): e is TypeError & { code: string } {
  return e instanceof TypeError && (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true
}

/**
 * Runs one command line. Exit codes: 0 done (and every `--help`, on stdout); 1 any error, said in
 * one line on stderr (a bad config: one line per problem); 2 nothing asked (no arguments: the
 * usage on stderr).
 */
export async function run (argv: string[], out: Out = console.log, err: Out = console.error): Promise<number> {
  const [group, sub, ...rest] = argv
  if (group === undefined) {
    err(usage())
    return 2
  }
  if (HELP_FLAGS.has(group) || group === 'help') {
    out(usage())
    return 0
  }
  let name: string = group
  try {
    if (sub !== undefined && HELP_FLAGS.has(sub)) {
      const text = groupUsage(group)
      if (text === undefined) throw new CommandError(`unknown command "${group}" (${PROGRAM} --help lists the commands)`)
      out(text)
      return 0
    }
    const command = findCommand(group, sub)
    name = command.name
    if (rest.some((arg) => HELP_FLAGS.has(arg))) {
      out(commandUsage(command))
      return 0
    }
    const handler = HANDLERS[command.name]
    if (handler === undefined) throw new Error(`no handler for ${command.name}`)
    return await handler(rest, out, err)
  } catch (e) {
    if (e instanceof UsageError) {
      err(`${PROGRAM}: ${e.message} (${PROGRAM} ${name} --help)`)
      return 1
    }
    if (e instanceof CommandError) {
      err(`${PROGRAM}: ${e.message}`)
      return 1
    }
    if (e instanceof ConfigError) {
      for (const problem of e.problems) err(`${PROGRAM}: ${problem}`)
      return 1
    }
    if (isParseArgsError(e)) {
      err(`${PROGRAM}: ${parseArgsMessage(e, name)} (${PROGRAM} ${name} --help)`)
      return 1
    }
    throw e
  }
}

const invokedAs = process.argv[1]
if (invokedAs !== undefined && import.meta.url === pathToFileURL(realpathSync(invokedAs)).href) {
  process.exitCode = await run(process.argv.slice(2))
}
