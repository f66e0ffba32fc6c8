// The scale section's gateways (bench/run.ts): one per count of keys in keys.yaml, each on a config
// directory written here, started as users start it and checked to serve a generated key. The
// largest, 100,000 keys, is a 10.6 MB keys.yaml: over the old 10 MiB CONFIG_MAX_BYTES it was refused
// and the bench waited 20 s for a gateway that had exited. Here each file is checked against the
// default limit before anything starts, a gateway that exits says so at once (targets.ts), and a
// big config is given the time its parse takes at the lowest CPU priority.
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { DEFAULT_CONFIG_MAX_BYTES } from '../../src/gateway/config/read-files.js'
import { writeConfigWithKeys } from '../config-load.js'
import { unboundPlans } from './processes.js'
import { assertServes, startGateway, type GatewayChild, type Target } from './targets.js'

export const CONFIG_KEY_COUNTS = [10, 10_000, 100_000] as const
/** A gateway on 100,000 keys parses its config (≈ 1–8 s, at the lowest CPU priority) before it answers. */
export const SCALE_READY_TIMEOUT_MS = 90_000

/** `count` generated keys (bench-key-N, plans that never bind) in a config dir under `work`. */
export function writeScaleConfig (work: string, count: number): string {
  const dir = writeConfigWithKeys(count, join(work, `config-${count}`))
  unboundPlans(dir)
  const bytes = statSync(join(dir, 'keys.yaml')).size
  if (bytes > DEFAULT_CONFIG_MAX_BYTES) {
    throw new Error(`keys.yaml of ${count} keys is ${bytes} bytes, over the default CONFIG_MAX_BYTES (${DEFAULT_CONFIG_MAX_BYTES}): the gateway would refuse it`)
  }
  return dir
}

/** One gateway per CONFIG_KEY_COUNTS entry, in that order, each answering 200 to `bench-key-0`. */
export async function startScaleGateways (work: string, opts: Omit<GatewayChild, 'configDir'>): Promise<Target[]> {
  const gateways: Target[] = []
  for (const count of CONFIG_KEY_COUNTS) {
    const configDir = writeScaleConfig(work, count)
    const target = await startGateway(`config ${count.toLocaleString('en')} keys, 1 active`, { readyTimeoutMs: SCALE_READY_TIMEOUT_MS, ...opts, configDir })
    await assertServes(target, 'bench-key-0')
    gateways.push(target)
  }
  return gateways
}
