// Connections that never send a byte, from many source addresses (127.x.y.z, or IPv6 addresses of
// 2001:db8::/48 routed to lo): the slot-squatting attack of issue 33 row 1. Each address holds
// `perAddress` connections; one the server closes is opened again at once (a persistent attacker),
// until stop(). Connects are limited to a few hundred at a time so the listen backlog is not the
// thing measured. Used by test/gateway/edge/connection-squat.test.ts and bench/idle-squat.ts.
import { connect, isIPv6, type Socket } from 'node:net'

/** Connects in progress at most. */
const CONNECTING_MAX = 256

export interface SilentFloodTarget {
  host: string
  port: number
}

export interface SilentFlood {
  /** Connections established and still open. */
  readonly open: number
  /** Connections the server closed (each reopened while the flood runs). */
  readonly closedByServer: number
  /** Connections opened in all. */
  readonly opened: number
  /** Resolves once as many connections as asked for have been opened, reopened ones included (or `timeoutMs` passed); the connections open then. */
  filled: (timeoutMs: number) => Promise<number>
  /** Stops reopening and closes every connection. */
  stop: () => void
}

export function silentFlood (target: SilentFloodTarget, addresses: readonly string[], perAddress: number, reopen = true): SilentFlood {
  const sockets = new Set<Socket>()
  const queue: string[] = []
  let connecting = 0
  let open = 0
  let closedByServer = 0
  let opened = 0
  let running = true

  function pump (): void {
    while (running && connecting < CONNECTING_MAX && queue.length > 0) start(queue.shift() ?? '')
  }

  function start (localAddress: string): void {
    connecting++
    let established = false
    const socket = connect({ host: target.host, port: target.port, localAddress, ...(isIPv6(target.host) ? { family: 6 } : {}) })
    sockets.add(socket)
    socket.on('error', () => {})
    socket.once('connect', () => {
      established = true
      connecting--
      open++
      opened++
      pump()
    })
    socket.once('close', () => {
      sockets.delete(socket)
      if (established) open--
      else connecting--
      if (!running) return
      if (established) closedByServer++
      if (reopen) queue.push(localAddress)
      setImmediate(pump)
    })
  }

  for (let i = 0; i < perAddress; i++) for (const address of addresses) queue.push(address)
  pump()
  const wanted = addresses.length * perAddress
  return {
    get open () { return open },
    get closedByServer () { return closedByServer },
    get opened () { return opened },
    async filled (timeoutMs) {
      const deadline = Date.now() + timeoutMs
      while (opened < wanted && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      return open
    },
    stop () {
      running = false
      queue.length = 0
      for (const socket of sockets) socket.destroy()
    }
  }
}
