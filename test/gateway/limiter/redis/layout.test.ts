// The Redis layout is named once (src/gateway/limiter/redis/layout.ts) and the grant script, which must stand
// alone, declares the same: its FIELD table, its reserve lifetime, escalation memory and block lifetime, and its rings' bucket
// lengths and sizes. This fails if the script and the TypeScript ever differ, and if a field letter is used in
// the script outside its FIELD table.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { DAY_WINDOW, MINUTE_WINDOW } from '../../../../src/gateway/limiter/arithmetic.js'
import { BLOCK_HELD_BUCKETS, ESCALATION_MS, FIELD, RESERVE_PACE_BUCKETS, RESERVE_SLACK_SECONDS, RESERVE_TTL_MS } from '../../../../src/gateway/limiter/redis/layout.js'

const lua = readFileSync(new URL('../../../../src/gateway/limiter/lua/grant.lua', import.meta.url), 'utf8')
const snake = (name: string): string => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)

const table = /^local FIELD = \{([^}]*)\}/m.exec(lua)
t.ok(table !== null, 'grant.lua declares its FIELD table')
const luaFields = Object.fromEntries([...(table?.[1] ?? '').matchAll(/(\w+) = '(\w)'/g)].map((match) => [match[1]!, match[2]!]))
t.same(luaFields, Object.fromEntries(Object.entries(FIELD).map(([name, letter]) => [snake(name), letter])), 'grant.lua\'s FIELD is layout.ts\'s FIELD')

const outsideTable = lua.replace(table?.[0] ?? '', '').split('\n').map((line) => line.replace(/--.*$/, ''))
const letters = new Set<string>(Object.values(FIELD))
const stray = outsideTable.flatMap((line) => [...line.matchAll(/'(\w)'/g)].map((match) => match[1]!)).filter((letter) => letters.has(letter))
t.same(stray, [], 'no field letter in grant.lua outside its FIELD table')

const constant = (name: string): number | undefined => {
  const names = /^local ([\w, ]+) = ([\d., ]+)$/m.exec(lua.split('\n').find((line) => new RegExp(`^local [\\w, ]*\\b${name}\\b`).test(line)) ?? '')
  if (names === null) return undefined
  const index = names[1]!.split(',').map((n) => n.trim()).indexOf(name)
  return Number(names[2]!.split(',')[index])
}
t.equal(constant('RESERVE_TTL_MS'), RESERVE_TTL_MS, 'the reserve lifetime is layout.ts\'s')
t.equal(constant('ESCALATION_MS'), ESCALATION_MS, 'the escalation memory is layout.ts\'s')
t.equal(constant('BLOCK_HELD_BUCKETS'), BLOCK_HELD_BUCKETS, 'how long a block counts as held is layout.ts\'s (calls.ts waits for blocks that long)')
t.equal(constant('RESERVE_SLACK_SECONDS'), RESERVE_SLACK_SECONDS, 'how long the room must last at the pace for a reserve is layout.ts\'s (calls.ts asks with it)')
t.equal(constant('RESERVE_PACE_BUCKETS'), RESERVE_PACE_BUCKETS, 'the buckets of the key\'s pace are layout.ts\'s')

const ring = (name: string): { ms: number, slots: number } | undefined => {
  const match = new RegExp(`^local ${name} = \\{ ms = ([\\d.]+), slots = (\\d+),`, 'm').exec(lua)
  return match === null ? undefined : { ms: Number(match[1]), slots: Number(match[2]) }
}
t.same(ring('MR'), { ms: MINUTE_WINDOW.bucketMs, slots: MINUTE_WINDOW.slots }, 'the minute ring is arithmetic.ts\'s')
t.same(ring('DR'), { ms: DAY_WINDOW.bucketMs, slots: DAY_WINDOW.slots }, 'the day ring is arithmetic.ts\'s')
