// The config the tests run against, and what a test needs to speak to a gateway, without the gateway: the
// fixture config's texts and parsed snapshot, plans.yaml with overrides, the demo keys, a bearer header. Kept
// apart from gateway.ts so that a test file that starts gateways as processes (or none) does not import the
// whole gateway into its own process: about 0.6 s of CPU a test process, with coverage.
import { cpSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CONFIG_FILES, ConfigError, parseConfig, type ConfigTexts } from '../../src/gateway/config/loader.js'
import type { ConfigSnapshot } from '../../src/gateway/config/types.js'

/** Plaintext of the demo keys in test/fixtures/config/keys.yaml (the same as config/keys.yaml and the README's table). */
export const DEMO_KEYS = {
  free: 'psk_demo_free_bdxDZXIFscNgMlSRUnWEc7yM',
  pro: 'psk_demo_pro_uenUZBiCRIjwMQludQiJmPup',
  business: 'psk_demo_business_pG4Jl1QXMbUVGdFJXnllAavb',
  enterprise: 'psk_demo_enterprise_vO514dNeE4scVvSxLPY5alCa'
} as const

/**
 * The config tests run against: a copy of the shipped config/ kept under test/fixtures/, so editing
 * the shipped demo config cannot change what a test sees. Copy it to a temp dir to modify it.
 */
export const FIXTURE_CONFIG_DIR = join(import.meta.dirname, '..', 'fixtures', 'config')
/** The config/ the repository ships (demo keys); only the test of the shipped files reads it. */
export const SHIPPED_CONFIG_DIR = join(import.meta.dirname, '..', '..', 'config')

/** A copy of the fixture config in a directory of the test's own (`t.testdir()`), for a test that changes its files. */
export function fixtureConfigCopy (t: { testdir: () => string }): string {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  return dir
}

/** The fixture config texts, with any file replaced. */
export function configTexts (overrides: Partial<ConfigTexts> = {}): ConfigTexts {
  const texts = {} as ConfigTexts
  for (const file of CONFIG_FILES) texts[file] = overrides[file] ?? readFileSync(join(FIXTURE_CONFIG_DIR, file), 'utf8')
  return texts
}

export function testConfig (overrides: Partial<ConfigTexts> = {}): ConfigSnapshot {
  return parseConfig(configTexts(overrides))
}

/** The problems the loader reports for the fixture config with these files replaced; [] when it is accepted. */
export function configProblems (overrides: Partial<ConfigTexts> = {}): readonly string[] {
  try {
    parseConfig(configTexts(overrides))
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
  return []
}

/** What a state-changing admin request must say (the admin app refuses anything else: src/gateway/admin/request-guard.ts). */
export const ADMIN_JSON: Readonly<Record<string, string>> = Object.freeze({ 'content-type': 'application/json' })

export function bearer (key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` }
}

type LimitsOverride = { perMinute: number, perDay: number }
export interface PlansOverrides {
  free?: LimitsOverride
  pro?: LimitsOverride
  business?: LimitsOverride
  anonymous?: LimitsOverride
  ban?: Partial<{ threshold: number, windowSeconds: number, durationSeconds: number, maxDurationSeconds: number }>
}

/** plans.yaml as shipped (free 60/1000, pro 300/10000, business 1000/100000, enterprise custom), with overrides. */
export function plansYaml (o: PlansOverrides = {}): string {
  const line = (l: LimitsOverride): string => `{ perMinute: ${l.perMinute}, perDay: ${l.perDay} }`
  const ban = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86400, ...o.ban }
  return [
    'plans:',
    `  free: ${line(o.free ?? { perMinute: 60, perDay: 1000 })}`,
    `  pro: ${line(o.pro ?? { perMinute: 300, perDay: 10000 })}`,
    `  business: ${line(o.business ?? { perMinute: 1000, perDay: 100000 })}`,
    '  enterprise: { custom: true }',
    `anonymous: ${line(o.anonymous ?? { perMinute: 30, perDay: 300 })}`,
    `ban: { threshold: ${ban.threshold}, windowSeconds: ${ban.windowSeconds}, durationSeconds: ${ban.durationSeconds}, maxDurationSeconds: ${ban.maxDurationSeconds} }`,
    ''
  ].join('\n')
}
