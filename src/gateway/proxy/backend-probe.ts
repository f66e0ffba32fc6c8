// Readiness of the backend: can a TCP connection be opened to it. Cheap, and says nothing about
// the backend's own routes, which the proxy's 502/504 already report per request.
import { connect } from 'node:net'

export function probeBackend (backendUrl: string, timeoutMs = 1000): Promise<void> {
  const url = new URL(backendUrl)
  const port = Number(url.port !== '' ? url.port : url.protocol === 'https:' ? 443 : 80)
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port, timeout: timeoutMs })
    socket.once('connect', () => { socket.destroy(); resolve() })
    socket.once('timeout', () => { socket.destroy(); reject(new Error(`backend ${url.host}: no connection within ${timeoutMs} ms`)) })
    socket.once('error', (err: NodeJS.ErrnoException) => { socket.destroy(); reject(new Error(`backend ${url.host}: ${err.code ?? err.message}`)) })
  })
}
