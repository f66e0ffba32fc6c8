// Digests of the demo keys shipped in config/ (their plaintext is in the README). A production
// gateway must refuse to run with any of them, whatever id a config gives them.
import { ConfigError } from './loader.js'
import type { ConfigSnapshot } from './types.js'

export const DEMO_KEY_DIGESTS: ReadonlySet<string> = new Set([
  'd14d802016ff49cf9eba6302dd9baad9ac142c1ddbd39dc1e0927dbe6d77ff48',
  'e7daab8507f58ed6078e7ec8fd803e8ee58af24cfc496e8e7476d78b7194e0c8',
  '7026b86b0ef8ebc6ac0922bd9dc1f25e7062b4346e2815131969809a47878d32',
  '33f639c49918e5eeecf11fa176c37b1c383de37712dc82106a4aacc88fc0e890'
])

export function assertNoDemoKeys (snapshot: ConfigSnapshot): void {
  // Four lookups, not a scan of every key: this runs on the event loop after each reload.
  const found = [...DEMO_KEY_DIGESTS].map((digest) => snapshot.keysByDigest.get(digest)?.id).filter((id) => id !== undefined)
  if (found.length > 0) {
    throw new ConfigError([`keys.yaml: demo keys are configured (${found.join(', ')}); remove them before running with NODE_ENV=production`])
  }
}
