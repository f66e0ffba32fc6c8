// Entry of the backend process: settings from the environment, listen, and a bounded graceful close on
// SIGTERM/SIGINT so SQLite is checkpointed and closed before exit.
import '../shared/runtime-guard.js'
import closeWithGrace from 'close-with-grace'
import { portInUseMessage } from '../shared/port-in-use.js'
import { tracingSettingsFromEnv } from '../shared/tracing/settings.js'
import { buildBackend } from './app.js'
import { DEFAULT_BACKEND_SERVICE_NAME } from './tracing.js'

const DEFAULT_HOST = '127.0.0.1'
const DEFAULT_PORT = 3001
const DEFAULT_DB_PATH = './data/pets.db'
const DEFAULT_LOG_LEVEL = 'info'
const DEFAULT_CLOSE_TIMEOUT_MS = 10_000

function portFrom (value: string | undefined): number {
  if (value === undefined || value === '') return DEFAULT_PORT
  const port = Number(value)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`BACKEND_PORT must be an integer 0-65535, got "${value}"`)
  }
  return port
}

const settings = {
  host: process.env.BACKEND_HOST ?? DEFAULT_HOST,
  port: portFrom(process.env.BACKEND_PORT),
  dbPath: process.env.PETS_DB ?? DEFAULT_DB_PATH,
  logLevel: process.env.LOG_LEVEL ?? DEFAULT_LOG_LEVEL,
  tracing: tracingSettingsFromEnv(process.env, DEFAULT_BACKEND_SERVICE_NAME)
}

// `service` tells the backend's lines from the gateway's when both write to one stream (`npm start`).
const app = buildBackend({ dbPath: settings.dbPath, logger: { level: settings.logLevel, base: { service: 'backend', pid: process.pid } }, tracing: settings.tracing })

closeWithGrace({ delay: DEFAULT_CLOSE_TIMEOUT_MS, logger: app.log }, async function closeBackend ({ signal, err }) {
  if (err !== undefined) app.log.error({ err }, 'backend stopping after an error')
  else app.log.info({ signal }, 'backend stopping')
  await app.close()
})

try {
  await app.listen({ host: settings.host, port: settings.port })
} catch (err) {
  const inUse = portInUseMessage(err, settings.port, 'BACKEND_PORT')
  if (inUse === undefined) throw err
  app.log.fatal(inUse)
  process.exit(1)
}
