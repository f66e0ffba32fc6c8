// The request line's cost alone: pino's `info(fields, 'request')` against the gateway's own writer of the same line
// (src/gateway/observability/request-line.ts), both through the logger createGatewayLogging makes, into /dev/null
// (batched as in production), in one process, interleaved (the order reversed every round), so the machine's speed
// falls on both alike. Prints ns per line per round, the medians and the median of the per-round differences.
//   taskset -c 1 node --import ./src/ts-resolve.ts bench/request-line.ts   REQUEST_LINE_ROUNDS (7) REQUEST_LINE_LINES (200000)
import { openSync } from 'node:fs'
import { createGatewayLogging } from '../src/gateway/observability/logger.js'
import { median } from './lib/load.js'

const rounds = Number(process.env.REQUEST_LINE_ROUNDS ?? 7)
const lines = Number(process.env.REQUEST_LINE_LINES ?? 200_000)
const { logger, requestLine } = createGatewayLogging({ level: 'info', fd: openSync('/dev/null', 'w') })
const decision = { outcome: 'ok', policy: 'pro', remaining: 4321 }

/** The fields logRequest builds for a proxied request of a consumer (a new request id each line). */
function fieldsOf (index: number): Record<string, unknown> {
  return { reqId: `0b7e3c1e-8a4f-4a57-9d2b-${index.toString(16).padStart(12, '0')}`, consumerId: 'acme', keyId: 'demo-pro', plan: 'pro', method: 'GET', route: '/v1/pets', status: 200, durationMs: Math.round(1234.567 + index % 1000) / 1000, upstreamMs: 0.812, rateLimit: decision, deprecated: undefined }
}

const subjects: Record<string, (index: number) => void> = {
  pino: (index) => { logger.info(fieldsOf(index), 'request') },
  writer: (index) => { requestLine(logger, fieldsOf(index), 'request') }
}

function timeOf (write: (index: number) => void): number {
  const started = process.hrtime.bigint()
  for (let index = 0; index < lines; index++) write(index)
  return Number(process.hrtime.bigint() - started) / lines
}

for (const write of Object.values(subjects)) timeOf(write) // warm-up: both compiled before the first round
const perRound: Record<string, number[]> = { pino: [], writer: [] }
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? ['pino', 'writer'] : ['writer', 'pino']
  for (const name of order) perRound[name]!.push(timeOf(subjects[name]!))
  process.stdout.write(`round ${round + 1}: pino ${perRound.pino!.at(-1)!.toFixed(0)} ns, writer ${perRound.writer!.at(-1)!.toFixed(0)} ns per line\n`)
}
const differences = perRound.writer!.map((value, index) => value - perRound.pino![index]!)
process.stdout.write(`${rounds} rounds of ${lines} lines: pino ${median(perRound.pino!).toFixed(0)} ns, writer ${median(perRound.writer!).toFixed(0)} ns per line (medians); writer − pino ${median(differences).toFixed(0)} ns (${differences.filter((d) => d < 0).length} of ${rounds} rounds lower)\n`)
