// The grant calls a bench/zipf-calls.ts run records (ZIPF_CALLS_RECORD) and the replays read back
// (grant-replay.ts, grant-lua51.ts, grant-lua-profile.ts): one shape, written and read in one place.
import { readFileSync } from 'node:fs'

/** One grant call as sent: when (Unix ms, the sender's clock), its KEYS and its ARGV. */
export interface RecordedCall { readonly at: number, readonly keys: readonly string[], readonly args: readonly string[] }

/** The calls a ZIPF_CALLS_RECORD file holds, in the order they were sent. */
export function readRecordedCalls (path: string): RecordedCall[] {
  return JSON.parse(readFileSync(path, 'utf8')) as RecordedCall[]
}
