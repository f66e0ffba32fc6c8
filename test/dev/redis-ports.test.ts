// The tests' Redis helper picks ports another test file cannot take between its check and the server's bind:
// below the kernel's ephemeral range (where listen(0) and outgoing connections take theirs), and when another
// test's Redis took the port first anyway, the server's exit is seen at once and another port is tried (a
// Cluster node once waited 30 s for a PING its server, gone at start, never answered). The processes tests start
// (gateways, backends) get ports below Redis's for the same reason (test/helpers/ports.ts).
import t from 'tap'
import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { redisPortRange, startOnFreePort } from '../helpers/redis.js'
import { freePort } from '../helpers/ports.js'

t.test('Redis ports and their cluster bus ports lie below the ephemeral range', async (t) => {
  const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0])
  const { low, high } = redisPortRange()
  t.ok(low >= 1024 && high > low, `range ${low}–${high}`)
  t.ok(high + 10_000 <= ephemeralLow, `bus ports end at ${high + 10_000}, ephemeral ports start at ${ephemeralLow}`)
})

t.test('a port taken between the check and the bind: the server exits, another port is used', async (t) => {
  const taken: Server = createServer((socket) => { socket.destroy() }) // a client of it gets nothing: not a Redis
  const takenPort = await freePort()
  await new Promise<void>((resolve) => taken.listen(takenPort, '127.0.0.1', resolve))
  t.teardown(() => { taken.close() })
  const dir = mkdtempSync(join(tmpdir(), 'petstore-redis-ports-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const offered: number[] = []
  const spare = await freePort()
  const started = await startOnFreePort(() => ['--save', ''], dir, async () => {
    const port = offered.length === 0 ? takenPort : spare
    offered.push(port)
    return port
  })
  t.teardown(() => { started.child.kill('SIGKILL') })
  t.same(offered, [takenPort, spare], 'the taken port was tried first, then another')
  t.equal(started.port, spare)
  t.equal(started.child.exitCode, null, 'the server on the second port runs')
})

t.test('ports for the processes tests start lie below Redis\'s ports and the ephemeral range, where connections take theirs', async (t) => {
  const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0])
  const { low: redisLow } = redisPortRange()
  const ports = await Promise.all(Array.from({ length: 200 }, async () => await freePort()))
  const outside = ports.filter((port) => port < 1024 || port >= redisLow || port >= ephemeralLow)
  t.same(outside, [], `200 ports in ${Math.min(...ports)}–${Math.max(...ports)}, below ${redisLow} (Redis) and ${ephemeralLow} (ephemeral)`)
  t.same(ports.filter((port) => [3001, 6379, 8080, 9091].includes(port)), [], 'never an entry point\'s default port')
})
