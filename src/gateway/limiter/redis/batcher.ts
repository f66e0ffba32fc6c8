// One script call per turn and group: every grant entry queued during one event-loop turn leaves at
// the turn's end in one grant call per group (the one Redis; a slot on a Cluster), at most BATCH_MAX
// entries each. A call's budget is STORE_TIMEOUT_MS: past it the shard is failed (shard.ts) and its
// entries told, so their requests are answered without it; a reply that comes later was still
// counted, and is handed to its entries as it is (they spend or give back what it counted).
import type { RedisPort, Runtime } from './port.js'
import { GRANT, grantArgs, grantKeys, readGrantReply, type GrantEntry, type GrantReply } from './scripts.js'

/** Entries one grant call carries at most (Redis runs a script alone: a long one delays the rest). */
export const BATCH_MAX = 100

/** A call: its Redis time (Unix ms); the local (monotonic) instants it was written and its reply read. */
export interface Sent { readonly redisNow: number, readonly sent: number, readonly received: number }

/** A queued piece of work: its entries are built at the turn's end, with everything then waiting. */
export interface Job {
  readonly key: string
  build: () => GrantEntry[]
  /** The call's replies, one per entry built (none, and no `sent`, when it built nothing). */
  replied: (replies: GrantReply[], sent: Sent | undefined) => void
  /** The budget ran out; a reply may still come. */
  timedOut: () => void
  /** The call failed: whether Redis ran it is unknown. */
  failed: (err: Error) => void
}

/** Jobs sent in one call, their entries, and how many each job built. */
interface Batch { jobs: Job[], entries: GrantEntry[], sizes: number[] }

export function createBatcher (port: RedisPort, runtime: Runtime, shards: { fail: (shard: string, reason: string) => void, answered: (shard: string) => void }, holder: string, timeoutMs: number): { add: (job: Job) => void } {
  let queued: Map<string, Job[]> | undefined
  const empty = (): Batch => ({ jobs: [], entries: [], sizes: [] })

  function send ({ jobs, entries, sizes }: Batch): void {
    const shard = port.shardOf(jobs[0]!.key)
    const sent = runtime.now()
    let done = false
    let late = false
    // Timers run before the loop reads its sockets: the verdict waits for the end of the turn, so a
    // reply that arrived while the loop was busy is read first and no healthy shard is failed.
    const cancel = runtime.after(timeoutMs, () => {
      runtime.turnEnd(() => {
        if (done) return
        late = true
        shards.fail(shard, `no answer within ${timeoutMs} ms`)
        for (const job of jobs) job.timedOut()
      })
    })
    port.run(GRANT, grantKeys(entries), grantArgs(holder, entries)).then((raw) => {
      done = true
      cancel()
      const received = runtime.now()
      const { now, replies } = readGrantReply(raw, entries.length)
      if (late) shards.answered(shard)
      const info: Sent = { redisNow: now, sent, received }
      let offset = 0
      jobs.forEach((job, index) => { job.replied(replies.slice(offset, offset += sizes[index]!), info) })
    }, (err: unknown) => {
      done = true
      cancel()
      const error = err instanceof Error ? err : new Error(String(err))
      shards.fail(shard, error.message)
      for (const job of jobs) job.failed(error)
    })
  }

  function flush (): void {
    const groups = queued
    queued = undefined
    for (const jobs of groups?.values() ?? []) {
      let batch = empty()
      for (const job of jobs) {
        const built = job.build()
        if (built.length === 0) { job.replied([], undefined); continue }
        if (batch.entries.length + built.length > BATCH_MAX && batch.entries.length > 0) {
          send(batch)
          batch = empty()
        }
        batch.jobs.push(job)
        batch.entries.push(...built)
        batch.sizes.push(built.length)
      }
      if (batch.entries.length > 0) send(batch)
    }
  }

  return {
    add (job) {
      if (queued === undefined) {
        queued = new Map()
        runtime.turnEnd(flush)
      }
      const group = port.groupOf(job.key)
      const jobs = queued.get(group)
      if (jobs === undefined) queued.set(group, [job])
      else jobs.push(job)
    }
  }
}
