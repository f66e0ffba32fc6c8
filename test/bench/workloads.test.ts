import { createServer } from 'node:http'
import t from 'tap'
import { buildWorkloads, describePrefix, scriptCalls, selectWorkloads } from '../../bench/lib/workloads.js'
import { wrkAvailable, wrkThroughput } from '../../bench/lib/wrk.js'
import { sequenceShape, zipfSequence } from '../../bench/lib/zipf.js'

t.test('Zipf sequence: the same seed draws the same requests, another seed others, ranks in range', async (t) => {
  const opts = { consumers: 1_000, exponent: 1.1, length: 20_000, seed: 7 }
  const a = zipfSequence(opts)
  t.same(zipfSequence(opts), a, 'deterministic in the seed')
  t.not(zipfSequence({ ...opts, seed: 8 }).join(','), a.join(','), 'another seed, another sequence')
  t.equal(a.length, 20_000)
  t.ok(a.every((k) => Number.isInteger(k) && k >= 0 && k < 1_000), 'every rank is a consumer')
})

t.test('Zipf sequence follows the law: rank 1 twice as likely as rank 2 (2^1.1), rank 1 ten times rank 10 (10^1.1 = 12.6)', async (t) => {
  const seq = zipfSequence({ consumers: 10_000, exponent: 1.1, length: 200_000, seed: 21 })
  const count = (k: number): number => seq.filter((x) => x === k).length
  const first = count(0)
  t.ok(Math.abs(first / count(1) - 2 ** 1.1) < 0.15, `rank 1 ÷ rank 2 = ${first / count(1)}`)
  t.ok(Math.abs(first / count(9) - 10 ** 1.1) < 1.5, `rank 1 ÷ rank 10 = ${first / count(9)}`)
  const shape = sequenceShape(seq)
  t.ok(shape.top1 > 0.13 && shape.top1 < 0.17, `the busiest consumer sends ≈ 15 % (${shape.top1})`)
  t.ok(shape.distinct > 5_000, `a long tail: ${shape.distinct} distinct consumers`)
})

t.test('BENCH_WORKLOADS: all by default, a comma list, an unknown id refused', async (t) => {
  t.same([...selectWorkloads(undefined)], ['hot', 'keys', 'zipf'])
  t.same([...selectWorkloads('zipf, hot')].sort(), ['hot', 'zipf'])
  t.throws(() => selectWorkloads('hot,zipfian'), /unknown zipfian/)
  const [zipf] = buildWorkloads(new Set(['zipf']))
  t.equal(zipf?.tokens.length, 10_000, 'the Zipf workload spans 10,000 consumers')
  t.ok(zipf?.order?.every((k) => (zipf.tokens[k] ?? '') !== ''), 'its order indexes its tokens')
  // A run replays only the start of the sequence: the report says what that start holds.
  t.match(describePrefix([0, 0, 1, 2], 3), /first 3: 2 distinct consumers, the busiest 66\.7 %/)
  t.equal(describePrefix([0, 1], 0), '', 'nothing sent, nothing to describe')
})

t.test('script calls of a run: EVALSHA, EVAL and FCALL counted, inner and other commands not', async (t) => {
  t.equal(scriptCalls({ evalsha: 10, eval: 2, fcall: 1, hset: 40, time: 10, incr: 5 }), 13)
  t.equal(scriptCalls({}), 0)
})

t.test('wrk sends the tokens in the precomputed order, request after request', { skip: wrkAvailable() ? false : 'wrk is not installed' }, async (t) => {
  const seen: string[] = []
  const server = createServer((req, res) => {
    seen.push(req.headers.authorization ?? '')
    res.end('ok')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const { port } = server.address() as { port: number }
  const order = [2, 0, 0, 1]
  // One connection: wrk sends the next request only once the last is answered, so the order is exact.
  const run = await wrkThroughput({ url: `http://127.0.0.1:${port}/`, seconds: 1, connections: 1, tokens: ['a', 'b', 'c'], order })
  t.ok(run.total >= order.length * 2, `at least two passes over the order (${run.total} requests)`)
  const expected = (i: number): string => `Bearer ${['a', 'b', 'c'][order[i % order.length] ?? 0] ?? ''}`
  // wrk calls request() once more than it sends (while it sets the thread up): the sequence may
  // start one entry in, the same way every run.
  const offset = [0, 1].find((o) => seen[0] === expected(o) && seen[1] === expected(o + 1)) ?? -1
  t.ok(offset >= 0, `the first requests are the order's (${seen.slice(0, 4).join(', ')})`)
  t.same(seen.slice(0, 12), Array.from({ length: 12 }, (_, i) => expected(i + offset)))
  t.equal(seen.findIndex((h, i) => h !== expected(i + offset)), -1, 'every request followed the order, wrapping')
})
