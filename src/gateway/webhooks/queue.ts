// The queue contract between the events and their delivery, with the in-process queue. A job is one
// event for one endpoint; it is taken, then settled exactly one way: done, back for a retry at a due
// time, or dead (a dead letter, kept for the admin API and the CLI to read and replay). The Redis
// queue (redis-queue.ts) keeps jobs across crashes and processes; this one keeps them in this
// process's memory only: a restart loses what it held, and "once per threshold" holds per process
// (docs/decisions.md, "Webhooks").
import { eventBody, type DetectedEvent, type EventType } from './events.js'

/** One event for one endpoint, as it travels: the same id and body on every attempt. */
export interface DeliveryJob {
  readonly id: string
  readonly endpoint: string
  readonly type: EventType
  readonly body: string
  /** Attempts made so far. */
  readonly attempt: number
  /** Unix ms it was emitted (queued). */
  readonly queuedAt: number
}

export interface TakenJob {
  /** The queue's handle on it (a stream entry id on Redis). */
  readonly ref: string
  readonly job: DeliveryJob
}

export interface DeadLetter {
  readonly job: DeliveryJob
  /** Unix ms of the last attempt. */
  readonly deadAt: number
  /** Why the last attempt failed: a status or an error code, never a secret. */
  readonly lastError: string
}

export interface WebhookQueue {
  readonly kind: 'redis' | 'memory'
  /** Queues `event` for each endpoint unless its once-key was already taken: true when this call queued it. */
  emit: (event: DetectedEvent, endpoints: readonly string[], now: number) => Promise<boolean>
  /** Moves the retries due at `now` back into the queue; how many. */
  promote: (now: number) => Promise<number>
  /** Jobs to deliver now: those another (dead) process left unsettled too long first, then new ones. */
  take: (max: number) => Promise<TakenJob[]>
  done: (taken: TakenJob) => Promise<void>
  retry: (taken: TakenJob, job: DeliveryJob, dueAt: number) => Promise<void>
  dead: (taken: TakenJob, letter: DeadLetter) => Promise<void>
  /** The dead letters, newest first (at most `max`). */
  deadLetters: (max: number) => Promise<DeadLetter[]>
  /** Queues the dead letters of event `id` again (all of them for `*`), with a fresh schedule; how many. */
  replay: (id: string) => Promise<number>
  /** Jobs waiting: queued, being delivered, and waiting for a retry (not the dead letters). */
  depth: () => Promise<number>
  close: () => Promise<void>
}

/** Dead letters kept at most (the oldest are dropped past it). */
export const MAX_DEAD_LETTERS = 10_000

export function jobsOf (event: DetectedEvent, body: string, endpoints: readonly string[], now: number): DeliveryJob[] {
  return endpoints.map((endpoint) => ({ id: event.id, endpoint, type: event.type, body, attempt: 0, queuedAt: now }))
}

/** The in-process queue (the in-process limiter store's companion). */
export function createMemoryQueue (): WebhookQueue {
  /** once-key → Unix ms it expires. */
  const once = new Map<string, number>()
  let queued: TakenJob[] = []
  const taken = new Map<string, TakenJob>()
  let retries: Array<{ dueAt: number, job: DeliveryJob }> = []
  const dead: DeadLetter[] = []
  let sequence = 0
  const enqueue = (job: DeliveryJob): void => { queued.push({ ref: String(++sequence), job }) }
  return {
    kind: 'memory',
    async emit (event, endpoints, now) {
      for (const [key, until] of once) if (until <= now) once.delete(key)
      if (once.has(event.once)) return false
      once.set(event.once, now + event.onceTtlMs)
      for (const job of jobsOf(event, eventBody(event), endpoints, now)) enqueue(job)
      return true
    },
    async promote (now) {
      const due = retries.filter((r) => r.dueAt <= now)
      retries = retries.filter((r) => r.dueAt > now)
      for (const r of due) enqueue(r.job)
      return due.length
    },
    async take (max) {
      const next = queued.slice(0, max)
      queued = queued.slice(max)
      for (const job of next) taken.set(job.ref, job)
      return next
    },
    async done (job) { taken.delete(job.ref) },
    async retry (job, next, dueAt) {
      taken.delete(job.ref)
      retries.push({ dueAt, job: next })
    },
    async dead (job, letter) {
      taken.delete(job.ref)
      dead.unshift(letter)
      if (dead.length > MAX_DEAD_LETTERS) dead.length = MAX_DEAD_LETTERS
    },
    async deadLetters (max) { return dead.slice(0, max) },
    async replay (id) {
      let count = 0
      for (let i = dead.length - 1; i >= 0; i--) {
        const letter = dead[i]
        if (letter === undefined || (id !== '*' && letter.job.id !== id)) continue
        dead.splice(i, 1)
        enqueue({ ...letter.job, attempt: 0 })
        count++
      }
      return count
    },
    async depth () { return queued.length + taken.size + retries.length },
    async close () {}
  }
}
