import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type AddressInfo } from 'node:net'
import t from 'tap'
import { CHILD_ENV, TS_NODE_ARGS } from '../helpers/processes.js'
import { EVENT_TIMEOUT_MS, poll, sleep } from '../helpers/poll.js'

const SERVER = 'src/backend/server.ts'

function startServer (env: Record<string, string>): { child: ReturnType<typeof spawn>, output: () => string, listening: Promise<string> } {
  const child = spawn(process.execPath, [...TS_NODE_ARGS, SERVER], {
    env: { ...process.env, BACKEND_HOST: '127.0.0.1', BACKEND_PORT: '0', LOG_LEVEL: 'info', ...CHILD_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  const listening = new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (match?.[1] !== undefined) resolve(match[1])
    })
    child.stderr?.on('data', (chunk: Buffer) => { out += chunk.toString() })
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)))
  })
  listening.catch(() => {})
  return { child, output: () => out, listening }
}

t.test('the server entry listens, serves, and exits 0 on SIGTERM after closing', async (t) => {
  const dbPath = `${t.testdir()}/data/pets.db`
  const server = startServer({ PETS_DB: dbPath })
  t.teardown(() => { if (server.child.exitCode === null) server.child.kill('SIGKILL') })
  const url = await server.listening
  const created = await fetch(`${url}/v1/pets`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"Rex","categoryId":1}'
  })
  t.equal(created.status, 201)
  t.strictSame(await created.json(), { id: 1, name: 'Rex', categoryId: 1, status: 'available' })
  const listed = await fetch(`${url}/v1/pets`)
  t.strictSame(await listed.json(), [{ id: 1, name: 'Rex', categoryId: 1, status: 'available' }])
  // The line is written once the response has gone out: it can reach the pipe after the client has the answer.
  const requestLines = (): Array<Record<string, unknown>> => server.output().split('\n').filter((l) => l.includes('"reqId"')).map((l) => JSON.parse(l) as Record<string, unknown>)
  await poll(() => requestLines().length >= 2, EVENT_TIMEOUT_MS, 20)
  await sleep(100) // and no third line after it
  t.equal(requestLines().length, 2, 'one line per request (two requests)')
  t.match(requestLines()[0], { level: 30, service: 'backend', msg: 'request', method: 'POST', route: '/v1/pets', status: 201, durationMs: Number })
  t.match(requestLines()[1], { service: 'backend', msg: 'request', method: 'GET', route: '/v1/pets', status: 200 })
  const exited = once(server.child, 'exit')
  server.child.kill('SIGTERM')
  const [code] = await exited
  t.equal(code, 0)
  t.match(server.output(), /"msg":"backend stopping"/)
  t.match(server.output(), /"signal":"SIGTERM"/)
})

t.test('SIGINT also closes the server cleanly', async (t) => {
  const server = startServer({ PETS_DB: `${t.testdir()}/pets.db` })
  t.teardown(() => { if (server.child.exitCode === null) server.child.kill('SIGKILL') })
  await server.listening
  const exited = once(server.child, 'exit')
  server.child.kill('SIGINT')
  const [code] = await exited
  t.equal(code, 0)
})

t.test('a port in use stops the process with one line naming it and BACKEND_PORT', async (t) => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => blocker.close())
  const port = (blocker.address() as AddressInfo).port
  const server = startServer({ PETS_DB: `${t.testdir()}/pets.db`, BACKEND_PORT: String(port) })
  const [code] = await once(server.child, 'exit')
  t.equal(code, 1)
  t.match(server.output(), `"msg":"port ${port} is in use (BACKEND_PORT)"`)
  t.notMatch(server.output(), /\n\s+at /, 'no stack trace')
})

t.test('an invalid BACKEND_PORT stops the process with a clear message', async (t) => {
  const server = startServer({ PETS_DB: `${t.testdir()}/pets.db`, BACKEND_PORT: 'http' })
  const [code] = await once(server.child, 'exit')
  t.not(code, 0)
  t.match(server.output(), 'BACKEND_PORT must be an integer 0-65535, got "http"')
})
