// The Redis layout is named once (src/gateway/limiter/redis/layout.ts) and the grant script, which must stand
// alone, declares the same: its FIELD_ locals, its reserve lifetime, escalation memory and block lifetime, and its
// rings' bucket lengths and sizes. This fails if the script and the TypeScript ever differ, and if a field letter is used in
// the script outside its FIELD_ locals.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { DAY_WINDOW, MINUTE_WINDOW } from '../../../../src/gateway/limiter/arithmetic.js'
import { BLOCK_HELD_BUCKETS, ESCALATION_MS, FIELD, RESERVE_PACE_BUCKETS, RESERVE_SLACK_SECONDS, RESERVE_TTL_MS } from '../../../../src/gateway/limiter/redis/layout.js'

const lua = readFileSync(new URL('../../../../src/gateway/limiter/lua/grant.lua', import.meta.url), 'utf8')
const snake = (name: string): string => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)

// The field names are locals FIELD_<NAME> (a table would be made again on every call), declared on lines of their own.
const fieldLines = lua.split('\n').filter((line) => /^local FIELD_\w+(, FIELD_\w+)* = /.test(line))
t.ok(fieldLines.length > 0, 'grant.lua declares its FIELD_ locals')
const luaFields = Object.fromEntries(fieldLines.flatMap((line) => {
  const [names, letters] = line.replace(/^local /, '').split(' = ') as [string, string]
  const letterList = [...letters.matchAll(/'(\w)'/g)].map((match) => match[1]!)
  return names.split(', ').map((name, index) => [name.replace(/^FIELD_/, '').toLowerCase(), letterList[index]])
}))
t.same(luaFields, Object.fromEntries(Object.entries(FIELD).map(([name, letter]) => [snake(name), letter])), 'grant.lua\'s FIELD_ locals are layout.ts\'s FIELD')
t.notOk(/\bFIELD\./.test(lua), 'no FIELD table left in grant.lua')

const outsideTable = lua.split('\n').filter((line) => !fieldLines.includes(line)).map((line) => line.replace(/--.*$/, ''))
const letters = new Set<string>(Object.values(FIELD))
const stray = outsideTable.flatMap((line) => [...line.matchAll(/'(\w)'/g)].map((match) => match[1]!)).filter((letter) => letters.has(letter))
t.same(stray, [], 'no field letter in grant.lua outside its FIELD_ locals')

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
