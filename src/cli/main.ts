#!/usr/bin/env node
// `petstore-gateway`: the operator's command line — create and hash keys, check a config
// directory before shipping it, and list or lift bans in the configured Redis.
import { readFileSync, realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { keyDigest } from '../gateway/auth/bearer.js'
import { ConfigError, loadConfigDir } from '../gateway/config/loader.js'
import { createStore } from '../gateway/limiter/create-store.js'
import { settingsFromEnv } from '../gateway/settings.js'
import { generateKey } from './key-material.js'

const USAGE = `usage: petstore-gateway <command>
  keys create --id ID --plan PLAN [--per-minute N --per-day N] [--config DIR]
  keys hash [KEY]                 digest of KEY (or of the first line of stdin)
  config check [DIR]              validate a config directory (default CONFIG_DIR or ./config)
  bans list                       bans in force in the configured Redis (REDIS_URL / REDIS_CLUSTER_NODES)
  bans lift KEY_ID                end a key's ban`

class UsageError extends Error {}

type Out = (line: string) => void

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
  if (!snapshot.plans.has(plan)) throw new UsageError(`unknown plan "${plan}" (known: ${[...snapshot.plans.keys()].join(', ')})`)
  if (snapshot.plans.get(plan) === undefined && perMinute === undefined) throw new UsageError(`plan "${plan}" is custom: give --per-minute and --per-day`)
  if (snapshot.keysById.has(id)) throw new UsageError(`a key with id "${id}" already exists`)

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

function keysHash (args: string[], out: Out): number {
  const key = args[0] ?? readFileSync(0, 'utf8').split('\n', 1)[0]?.trim() ?? ''
  if (key === '') throw new UsageError('give the key as an argument or on stdin')
  out(keyDigest(key))
  return 0
}

function configCheck (args: string[], out: Out, err: Out): number {
  const dir = args[0] ?? process.env.CONFIG_DIR ?? './config'
  try {
    const snapshot = loadConfigDir(dir, { maxBytes: settingsFromEnv().configMaxBytes })
    out(`${dir}: ok (version ${snapshot.version}, ${snapshot.plans.size} plans, ${snapshot.keysById.size} keys, ${snapshot.routes.length} routes)`)
    return 0
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e
    for (const problem of e.problems) err(problem)
    return 1
  }
}

async function bans (sub: string | undefined, args: string[], out: Out): Promise<number> {
  const settings = settingsFromEnv()
  if (settings.redisUrl === undefined && settings.redisClusterNodes === undefined && settings.redisSentinels === undefined) {
    throw new UsageError('bans live in Redis: set REDIS_URL or REDIS_CLUSTER_NODES (an in-process gateway keeps its bans to itself: use its admin API)')
  }
  const store = await createStore(settings)
  try {
    if (sub === 'list') {
      const list = await store.listBans()
      if (list.length === 0) out('no bans in force')
      const now = Date.now()
      for (const ban of list.sort((a, b) => a.until - b.until)) {
        out(`${ban.id}\tuntil ${new Date(ban.until).toISOString()}\t(${Math.ceil((ban.until - now) / 1000)} s left)`)
      }
      return 0
    }
    if (sub === 'lift') {
      const id = args[0]
      if (id === undefined) throw new UsageError('bans lift needs a key id')
      const lifted = await store.liftBan(id)
      out(lifted ? `ban on ${id} lifted` : `${id} is not banned`)
      return lifted ? 0 : 1
    }
    throw new UsageError(`unknown bans command "${sub ?? ''}"`)
  } finally {
    await store.close()
  }
}

export async function run (argv: string[], out: Out = console.log, err: Out = console.error): Promise<number> {
  const [group, sub, ...rest] = argv
  try {
    if (group === 'keys' && sub === 'create') return keysCreate(rest, out)
    if (group === 'keys' && sub === 'hash') return keysHash(rest, out)
    if (group === 'config' && sub === 'check') return configCheck(rest, out, err)
    if (group === 'bans') return await bans(sub, rest, out)
    if (group === undefined || group === 'help' || group === '--help') {
      out(USAGE)
      return 0
    }
    throw new UsageError(`unknown command "${argv.join(' ')}"`)
  } catch (e) {
    if (e instanceof UsageError || e instanceof ConfigError || (e instanceof TypeError && (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true)) {
      err(`petstore-gateway: ${e.message}`)
      if (e instanceof UsageError) err(USAGE)
      return 2
    }
    throw e
  }
}

const invokedAs = process.argv[1]
if (invokedAs !== undefined && import.meta.url === pathToFileURL(realpathSync(invokedAs)).href) {
  process.exitCode = await run(process.argv.slice(2))
}
