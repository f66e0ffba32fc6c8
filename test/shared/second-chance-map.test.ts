// The second-chance map that bounds the key cache and the in-process limiter's states: its stated
// eviction order (an entry not hit since placed goes before one that was, oldest placed first), its
// bound, and that a hit moves nothing (the point of it: no list move per request).
import t from 'tap'
import { SecondChanceMap } from '../../src/shared/second-chance-map.js'

const keysOf = (map: SecondChanceMap<string, number>): string[] => [...map.entries()].map(([key]) => key)

t.test('at the bound, the oldest entry not hit since it was placed is evicted', async (t) => {
  const map = new SecondChanceMap<string, number>(3)
  map.set('a', 1)
  map.set('b', 2)
  map.set('c', 3)
  map.get('a')
  map.set('d', 4)
  t.equal(map.get('b'), undefined, 'b: oldest not hit, evicted')
  t.strictSame(keysOf(map), ['c', 'a', 'd'], 'a had its second chance: moved to the newest end, c now the oldest')
  t.equal(map.size, 3)
})

t.test('a hit entry survives one pass only: its mark is cleared when it is passed over', async (t) => {
  const map = new SecondChanceMap<string, number>(2)
  map.set('a', 1)
  map.set('b', 2)
  map.get('a')
  map.get('b')
  map.set('c', 3) // every entry hit: a full pass clears both marks, then the oldest placed (a) goes
  t.strictSame(keysOf(map), ['b', 'c'])
  map.set('d', 4) // b not hit since its second chance: evicted before c, which was placed after it
  t.strictSame(keysOf(map), ['c', 'd'])
})

t.test('an entry hit between evictions is never evicted by entries that are not: the hot key under a long tail of cold ones', async (t) => {
  const map = new SecondChanceMap<string, number>(100)
  map.set('hot', 0)
  const evictedHot: number[] = []
  let largest = 0
  for (let index = 0; index < 10_000; index++) {
    map.get('hot')
    map.set(`cold-${index}`, index)
    if (map.get('hot') === undefined) evictedHot.push(index)
    largest = Math.max(largest, map.size)
  }
  t.strictSame(evictedHot, [], 'the hot entry stayed through 10,000 cold ones at a bound of 100')
  t.equal(largest, 100, 'never above the bound')
  t.equal(map.size, 100)
})

t.test('a hit moves nothing; replacing a value keeps the place; delete and clear', async (t) => {
  const map = new SecondChanceMap<string, number>(3)
  map.set('a', 1)
  map.set('b', 2)
  map.get('a')
  t.strictSame(keysOf(map), ['a', 'b'], 'insertion order after a hit')
  map.set('a', 10)
  t.strictSame(keysOf(map), ['a', 'b'], 'a replaced value keeps its place')
  t.equal(map.get('a'), 10)
  t.equal(map.delete('a'), true)
  t.equal(map.delete('a'), false)
  map.clear()
  t.equal(map.size, 0)
  t.throws(() => new SecondChanceMap(0), RangeError)
})
