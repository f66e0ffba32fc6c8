// Free loopback TCP ports for processes that tests start as subprocesses.
import { createServer } from 'node:net'

export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** Polls `url` until it answers (any status) or `timeoutMs` passes. */
export async function waitForHttp (url: string, timeoutMs = 10_000): Promise<number> {
  const started = Date.now()
  for (;;) {
    try {
      const res = await fetch(url)
      await res.arrayBuffer()
      return Date.now() - started
    } catch (err) {
      if (Date.now() - started > timeoutMs) throw new Error(`${url} did not answer within ${timeoutMs} ms: ${String(err)}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}
