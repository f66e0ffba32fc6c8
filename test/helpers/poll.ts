// Waiting for something to become true without a fixed sleep: the one poller of the tests and the
// benches (bench/lib imports it). A probe that throws counts as "not yet" (a server still starting);
// its last error is named if time runs out.

/**
 * The deadline of a wait for something that will happen (a count refreshed, a reload, Redis back):
 * it tells a hang from a late event, never how fast it came. Generous, for a 2-core machine at load
 * 10–20, where 1–6 s deadlines were missed by events that did come.
 */
export const EVENT_TIMEOUT_MS = 30_000

/** A real wait, where the test is about time passing. */
export async function sleep (ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}

/** What a probe gives while the awaited thing has not happened yet. */
type NotYet = undefined | false

/**
 * Calls `probe` every `intervalMs` until it gives something other than undefined or false, and
 * returns that; after `timeoutMs`, one last call decides, and undefined means it never happened.
 */
export async function poll<T> (probe: () => T | NotYet | Promise<T | NotYet>, timeoutMs: number, intervalMs = 25): Promise<Exclude<T, NotYet> | undefined> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const last = Date.now() >= deadline
    try {
      const value = await probe()
      if (value !== undefined && value !== false) return value as Exclude<T, NotYet>
    } catch (err) {
      if (last) throw err
    }
    if (last) return undefined
    await sleep(Math.min(intervalMs, Math.max(0, deadline - Date.now())))
  }
}

/** An error with its causes (fetch's "fetch failed" says why only in `cause`: refused, reset, timed out…). */
function describeError (err: unknown): string {
  const parts: string[] = []
  for (let current: unknown = err; current !== undefined && current !== null && parts.length < 4; current = (current as { cause?: unknown }).cause) {
    const code = (current as { code?: unknown }).code
    parts.push(`${String(current)}${typeof code === 'string' ? ` (${code})` : ''}`)
  }
  return parts.join(' ← ')
}

/**
 * `poll`, failing with "`what` not within `timeoutMs` ms" when it never happens. The default is
 * `EVENT_TIMEOUT_MS`: a wait for an event only tells a hang from a late event (10 s was missed at
 * load 20 by events that came).
 */
export async function until<T> (what: string, probe: () => T | NotYet | Promise<T | NotYet>, timeoutMs = EVENT_TIMEOUT_MS, intervalMs = 25): Promise<Exclude<T, NotYet>> {
  let value: Exclude<T, NotYet> | undefined
  try {
    value = await poll(probe, timeoutMs, intervalMs)
  } catch (err) {
    throw new Error(`${what} not within ${timeoutMs} ms: ${describeError(err)}`)
  }
  if (value === undefined) throw new Error(`${what} not within ${timeoutMs} ms`)
  return value
}
