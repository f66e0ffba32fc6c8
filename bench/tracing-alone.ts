// The tracing work of one request alone (bench/lib/tracing-hooks.ts: the gateway's hooks and the
// undici channel messages, real SDK, export to a collector that drops), as one JSON line: the steady
// part of `BENCH_TRACING`, runnable on its own so that it can be run under different Node flags —
// e.g. with and without `--experimental-async-context-frame`, alternated process by process:
//   node [--experimental-async-context-frame] --import ./src/ts-resolve.ts bench/tracing-alone.ts
import { join } from 'node:path'
import { tracingHookCost } from './lib/tracing-hooks.js'
import { firstLine, REPO_ROOT, startNode, stop } from './lib/processes.js'

const sink = startNode([join(REPO_ROOT, 'bench', 'servers', 'otlp-sink.ts')], { stdout: 'pipe' })
try {
  const { port } = JSON.parse(await firstLine(sink)) as { port: number }
  const costs = await tracingHookCost(`http://127.0.0.1:${port}`)
  console.log(JSON.stringify({ execArgv: process.execArgv.filter((arg) => arg.startsWith('--experimental')), costs }))
} finally {
  await stop(sink)
}
