// Node 22's built-in SQLite (`node:sqlite`): no native addon to compile against the right Node's headers,
// so `npm ci` installs nothing that depends on which `node` ran it. Node 22 still flags the module
// experimental and prints a warning when it is first loaded; that one warning is kept out of the logs.
import { createRequire } from 'node:module'
import type * as Sqlite from 'node:sqlite'

const require = createRequire(import.meta.url)
const EXPERIMENTAL_NOTICE = 'SQLite is an experimental feature'

function loadSqlite (): typeof Sqlite {
  const emitWarning = process.emitWarning
  process.emitWarning = function (this: NodeJS.Process, warning: string | Error, ...rest: unknown[]) {
    if (String(warning).startsWith(EXPERIMENTAL_NOTICE)) return
    return (emitWarning as (...args: unknown[]) => void).call(this, warning, ...rest)
  } as typeof process.emitWarning
  try {
    return require('node:sqlite') as typeof Sqlite
  } finally {
    process.emitWarning = emitWarning
  }
}

export const { DatabaseSync } = loadSqlite()
export type DatabaseSync = Sqlite.DatabaseSync
