// startBackend: a real backend on 127.0.0.1 and a free port, over a fresh SQLite file unless one is given,
// closed (and its temporary directory removed) when the calling test ends.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { buildBackend } from '../../src/backend/app.js'
import { PROCESS_START_TIMEOUT_MS } from './ports.js'
import type { TracingSettings } from '../../src/shared/tracing/settings.js'

export interface StartedBackend {
  url: string
  port: number
  app: FastifyInstance
  dbPath: string
  /** Every log line the backend wrote, parsed (empty unless `logs` was asked for). */
  logs: Array<Record<string, unknown>>
  /** Closes the app; safe to call more than once and before the automatic teardown. */
  close (): Promise<void>
}

export interface StartBackendOptions {
  dbPath?: string
  bodyLimit?: number
  tracing?: TracingSettings
  /** Capture the backend's log lines (info level) in `logs`. */
  logs?: boolean
}

/** A stream whose JSON lines land, parsed, in `lines` (a pino destination). */
export function capturingStream (lines: Array<Record<string, unknown>>): Writable {
  return new Writable({
    write (chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>)
      cb()
    }
  })
}

export async function startBackend (t: Pick<Test, 'teardown'>, opts: StartBackendOptions = {}): Promise<StartedBackend> {
  let tempDir: string | undefined
  let dbPath = opts.dbPath
  if (dbPath === undefined) {
    tempDir = mkdtempSync(join(tmpdir(), 'petstore-backend-'))
    dbPath = join(tempDir, 'pets.db')
  }
  const logs: Array<Record<string, unknown>> = []
  const app = buildBackend({
    dbPath,
    // A plugin's start is not what tests time (the tracing plugin missed Fastify's 10 s at load 30).
    pluginTimeoutMs: PROCESS_START_TIMEOUT_MS,
    ...(opts.bodyLimit === undefined ? {} : { bodyLimit: opts.bodyLimit }),
    ...(opts.tracing === undefined ? {} : { tracing: opts.tracing }),
    ...(opts.logs === true ? { logger: { level: 'info', stream: capturingStream(logs) } } : {})
  })
  let closing: Promise<void> | undefined
  const close = async (): Promise<void> => {
    closing ??= app.close()
    await closing
  }
  t.teardown(async () => {
    await close()
    if (tempDir !== undefined) rmSync(tempDir, { recursive: true, force: true })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('backend is not listening on TCP')
  return { url: `http://127.0.0.1:${address.port}`, port: address.port, app, dbPath, logs, close }
}

export interface JsonResponse {
  status: number
  headers: Headers
  body: unknown
}

/** fetch + JSON body, so assertions can compare the whole body. */
export async function request (url: string, init?: RequestInit): Promise<JsonResponse> {
  const res = await fetch(url, init)
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) }
}

/** A POST with a JSON body (a string is sent as is, so malformed JSON can be tested). */
export function postJson (body: unknown, contentType = 'application/json'): RequestInit {
  return { method: 'POST', headers: { 'content-type': contentType }, body: typeof body === 'string' ? body : JSON.stringify(body) }
}

/** Asserts an Error-shaped response: status, JSON content type and the exact body. */
/** `url` answers 200 with an empty JSON array and no Link header. */
export async function assertEmptyList (t: Test, url: string): Promise<void> {
  const res = await request(url)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
  t.equal(res.headers.get('link'), null)
  t.strictSame(res.body, [])
}

export function assertError (t: Test, res: JsonResponse, status: number, code: string, message: string): void {
  t.equal(res.status, status, `status ${status}`)
  t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
  t.strictSame(res.body, { code, message, status })
}
