import t from 'tap'
import { execFile } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createGatewayLogger } from '../../../src/gateway/observability/logger.js'
import { CHILD_ENV, REPO_ROOT, TS_NODE_ARGS } from '../../helpers/processes.js'

const lines = (file: string): Array<Record<string, unknown>> =>
  readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>)

t.test('lines are batched, then flushed within the flush interval', async (t) => {
  const file = join(t.testdir(), 'log.ndjson')
  const fd = openSync(file, 'w')
  t.teardown(() => closeSync(fd))
  const logger = createGatewayLogger({ level: 'info', fd, bufferBytes: 4096, flushMs: 50 })
  logger.info({ keyId: 'k1', authorization: 'Bearer secret' }, 'request')
  t.same(lines(file), [], 'held in memory at first')
  await new Promise((resolve) => setTimeout(resolve, 150))
  t.match(lines(file), [{ level: 30, service: 'gateway', keyId: 'k1', authorization: '[Redacted]', msg: 'request' }])
})

t.test('with no buffer every line is written at once', async (t) => {
  const file = join(t.testdir(), 'log.ndjson')
  const fd = openSync(file, 'w')
  t.teardown(() => closeSync(fd))
  const logger = createGatewayLogger({ level: 'info', fd, bufferBytes: 0 })
  logger.info('one')
  logger.debug('below the level')
  t.match(lines(file), [{ msg: 'one' }])
})

t.test('a process that exits right after logging loses nothing', async (t) => {
  const file = join(t.testdir(), 'log.ndjson')
  const script = `import { openSync } from 'node:fs'
import { createGatewayLogger } from ${JSON.stringify(join(REPO_ROOT, 'src/gateway/observability/logger.ts'))}
const logger = createGatewayLogger({ level: 'info', fd: openSync(${JSON.stringify(file)}, 'w'), flushMs: 60000 })
for (let i = 0; i < 3; i++) logger.info({ i }, 'last words')
process.exit(0)`
  await promisify(execFile)(process.execPath, [...TS_NODE_ARGS, '--input-type=module', '-e', script], { cwd: REPO_ROOT, env: { ...process.env, ...CHILD_ENV } })
  t.same(lines(file).map((l) => l.i), [0, 1, 2])
})
