// The ban-lift subscriber (admin.ts `watchLifts`) on a real Redis whose connection is cut: it comes back
// subscribed and hears lifts again, and a gateway closed in the middle of that re-subscribe rejects nothing
// unhandled. ioredis's own re-subscribe sends SUBSCRIBE with no rejection handler, so the subscriber does its own.
import { connect as tcpConnect, createServer, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { BAN_LIFT_CHANNEL, createRedisAdmin } from '../../../../src/gateway/limiter/redis/admin.js'
import { createRedisClient } from '../../../../src/gateway/redis/connection.js'
import { freePort } from '../../../helpers/ports.js'
import { redisCli, startRedis } from '../../../helpers/redis.js'

/** Subscribers of the ban-lift channel the Redis at `port` counts now. */
async function subscribers (port: number): Promise<number> {
  return Number((await redisCli(port, 'PUBSUB', 'NUMSUB', BAN_LIFT_CHANNEL)).trim().split('\n').at(-1))
}

async function untilSubscribers (port: number, count: number): Promise<void> {
  while (await subscribers(port) !== count) await new Promise((resolve) => setTimeout(resolve, 10))
}

/**
 * A TCP relay to the Redis at `port` that, once `holding` is set, keeps back every SUBSCRIBE a client sends: the
 * moment between a re-subscribe sent and answered, made to last. A connection cut on one side is cut on the other.
 */
async function relay (t: Pick<Test, 'teardown'>, port: number): Promise<{ url: string, hold: () => void }> {
  let holding = false
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = tcpConnect(port, '127.0.0.1')
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('error', () => {})
      socket.on('close', () => { client.destroy(); upstream.destroy(); sockets.delete(socket) })
    }
    upstream.on('data', (chunk: Buffer) => client.write(chunk))
    client.on('data', (chunk: Buffer) => { if (!(holding && /subscribe/i.test(chunk.toString('latin1')))) upstream.write(chunk) })
  })
  const listenPort = await freePort()
  await new Promise<void>((resolve) => server.listen(listenPort, '127.0.0.1', resolve))
  t.teardown(() => { for (const socket of sockets) socket.destroy(); server.close() })
  return { url: `redis://127.0.0.1:${listenPort}`, hold: () => { holding = true } }
}

function connect (redis: { url: string }): ReturnType<typeof createRedisClient> & object {
  const client = createRedisClient({ redisUrl: redis.url })
  if (client === undefined) throw new Error('a Redis URL makes a client')
  client.on('error', () => { /* the cut below is on purpose */ })
  return client
}

t.test('cut from Redis, the subscriber subscribes again and hears the next lift', async (t) => {
  const redis = await startRedis(t)
  const client = connect(redis)
  const admin = createRedisAdmin(client, () => {})
  t.teardown(() => { admin.close(); client.disconnect() })
  const heard: Array<string | undefined> = []
  admin.watchLifts((id) => heard.push(id))
  await untilSubscribers(redis.port, 1)
  await redisCli(redis.port, 'PUBLISH', BAN_LIFT_CHANNEL, 'before')
  await redisCli(redis.port, 'CLIENT', 'KILL', 'TYPE', 'pubsub')
  await untilSubscribers(redis.port, 1)
  await redisCli(redis.port, 'PUBLISH', BAN_LIFT_CHANNEL, 'after')
  while (!heard.includes('after')) await new Promise((resolve) => setTimeout(resolve, 10))
  // Each (re)connection forgets every cached ban (undefined): lifts published while away are lost.
  t.same(heard, [undefined, 'before', undefined, 'after'], 'both lifts heard, each connection starting from nothing cached')
})

t.test('closed while it re-subscribes: no rejection is left unhandled', async (t) => {
  const redis = await startRedis(t)
  const relayed = await relay(t, redis.port)
  const client = connect(relayed)
  const admin = createRedisAdmin(client, () => {})
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown): void => { unhandled.push(reason) }
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => { process.off('unhandledRejection', onUnhandled) })
  let connections = 0
  const closed = new Promise<void>((resolve) => {
    admin.watchLifts((id) => {
      // The second connection's 'ready': the moment a re-subscribe is sent. Close the gateway's connections there.
      if (id !== undefined || ++connections < 2) return
      admin.close()
      client.disconnect()
      resolve()
    })
  })
  await untilSubscribers(redis.port, 1)
  relayed.hold()
  await redisCli(redis.port, 'CLIENT', 'KILL', 'TYPE', 'pubsub')
  await closed
  await new Promise((resolve) => setTimeout(resolve, 100)) // a rejected SUBSCRIBE surfaces within a few turns
  t.same(unhandled.map(String), [], 'nothing rejected unhandled')
  t.equal(await subscribers(redis.port), 0, 'and nothing is left subscribed')
})
