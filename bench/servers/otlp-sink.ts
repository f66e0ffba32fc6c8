// The collector of the tracing bench rows: accepts OTLP/HTTP exports (POST /v1/traces, protobuf or
// JSON), reads and drops them, answers 200 at once — so what the rows measure is the gateway's own
// cost of tracing, not a collector's. GET /stats says how many exports and bytes arrived. Prints
// {"port":N} once listening; SIGTERM stops it.
//   node --import tsx bench/servers/otlp-sink.ts
import { createServer } from 'node:http'

let exports = 0
let bytes = 0
const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ exports, bytes }))
    return
  }
  req.on('data', (chunk: Buffer) => { bytes += chunk.length })
  req.on('end', () => {
    exports++
    const json = (req.headers['content-type'] ?? '').startsWith('application/json')
    res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(json ? '{}' : undefined)
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})
process.once('SIGTERM', () => { server.closeAllConnections(); server.close(() => process.exit(0)) })
