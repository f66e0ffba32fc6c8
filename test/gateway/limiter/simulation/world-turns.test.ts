// The world (test/helpers/sim/world.ts) stops taking microtask turns after an event once the queue holds
// nothing but its own turn: the order must be the one a fixed 24 turns after every event gives, or a seed
// would no longer replay what it replayed before. Seeded events start promise chains of 0–40 steps (awaits of
// values and of promises, .then chains, Promise.all, thenables; some longer than 24 turns, so they run on
// into the next events' turns), some at the same instant; every step is logged, and the log must equal the
// one a reference loop gives that always takes all 24 turns (`await undefined`, as the world did before).
import t from 'tap'
import { prng, World } from '../../../helpers/sim/world.js'

const TURNS = 24
const START = 1_000_000

type Chain = (log: string[], label: string, steps: number) => void

/** The kinds of chain an event may start (each logs `label:step` at every step). */
const CHAINS: readonly Chain[] = [
  (log, label, steps) => { void (async () => { for (let i = 0; i < steps; i++) { log.push(`${label}:${i}`); await undefined } })() },
  (log, label, steps) => { void (async () => { for (let i = 0; i < steps; i++) { log.push(`${label}:${i}`); await Promise.resolve(i) } })() },
  (log, label, steps) => {
    let p: Promise<unknown> = Promise.resolve()
    for (let i = 0; i < steps; i++) p = p.then(() => { log.push(`${label}:${i}`) })
  },
  (log, label, steps) => {
    void Promise.all(Array.from({ length: steps }, async (_, i) => { await undefined; log.push(`${label}:${i}`) })).then(() => { log.push(`${label}:all`) })
  },
  (log, label, steps) => {
    void (async () => {
      for (let i = 0; i < steps; i++) {
        log.push(`${label}:${i}`)
        await { then (resolve: (v: number) => void) { resolve(i) } }
      }
    })()
  }
]

interface Planned { at: number, kind: number, steps: number, label: string }

function plan (seed: number): Planned[] {
  const random = prng(seed)
  return Array.from({ length: 120 }, (_, i) => ({
    // About one in four events shares its instant with the one before.
    at: START + Math.floor(random() * 30) * 10,
    kind: Math.floor(random() * CHAINS.length),
    steps: random() < 0.2 ? 25 + Math.floor(random() * 16) : Math.floor(random() * 8),
    label: `e${i}`
  }))
}

/** Once every chain still running has finished (a macrotask runs only when the microtask queue is empty). */
async function drained (): Promise<void> {
  await new Promise((resolve) => { setImmediate(resolve) })
}

/** The world as it runs now. */
async function viaWorld (events: readonly Planned[]): Promise<string[]> {
  const log: string[] = []
  const world = new World(1, START)
  for (const e of events) world.at(e.at, () => { log.push(`${e.label}@${world.now}`); CHAINS[e.kind]!(log, e.label, e.steps) })
  await world.run(START + 1_000)
  log.push('end')
  await drained()
  return log
}

/**
 * The reference: the same events in (instant, order scheduled) order, every one followed by all 24 turns, in an
 * async function awaited as World.run is (so what the chains log after the last event's turns falls where it did).
 */
async function viaAllTurns (events: readonly Planned[]): Promise<string[]> {
  const log: string[] = []
  const ordered = events.map((e, seq) => ({ e, seq })).sort((a, b) => a.e.at - b.e.at || a.seq - b.seq)
  const run = async (): Promise<void> => {
    for (const { e } of ordered) {
      log.push(`${e.label}@${e.at}`)
      CHAINS[e.kind]!(log, e.label, e.steps)
      for (let i = 0; i < TURNS; i++) await undefined
    }
  }
  await run()
  log.push('end')
  await drained()
  return log
}

for (const seed of [1, 2, 3, 4, 5]) {
  t.test(`seed ${seed}: the same order as 24 turns after every event`, async (t) => {
    const events = plan(seed)
    const world = await viaWorld(events)
    const reference = await viaAllTurns(events)
    t.comment(`${events.length} events, ${events.filter((e) => e.steps > TURNS).length} chains longer than ${TURNS} turns, ${reference.length} steps logged`)
    t.same(world, reference, 'every step of every chain in the reference order')
  })
}

t.test('a chain longer than the turns runs on into the next event, as before', async (t) => {
  const events: Planned[] = [
    { at: START, kind: 0, steps: 30, label: 'long' },
    { at: START, kind: 0, steps: 2, label: 'next' }
  ]
  const world = await viaWorld(events)
  t.same(world, await viaAllTurns(events))
  // `next` starts after the 24th turn: 'long' has logged 25 steps (0–24) by then and goes on after it.
  t.ok(world.indexOf('next@1000000') > world.indexOf('long:24') && world.indexOf('next@1000000') < world.indexOf('long:25'), 'the next event starts between the 25th and the 26th step')
})
