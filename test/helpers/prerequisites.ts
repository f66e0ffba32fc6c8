// Run before `npm test`: the suite starts real redis-server processes, runs promtool and drives
// Debian's chromium, so say at once, by name, what this machine lacks instead of failing later.
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'

const TOOLS: Array<[binary: string, debianPackage: string, path?: string]> = [
  ['redis-server', 'redis-server'],
  ['redis-cli', 'redis-tools'],
  ['promtool', 'prometheus'],
  ['chromium', 'chromium', process.env.CHROMIUM_PATH ?? '/usr/bin/chromium']
]

function onPath (binary: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, binary), constants.X_OK)
      return true
    } catch {
      return false
    }
  })
}

function executable (path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

const missing = TOOLS.filter(([binary, , path]) => path === undefined ? !onPath(binary) : !executable(path))
if (missing.length > 0) {
  console.error(`npm test needs ${missing.map(([b]) => b).join(', ')}; on Debian/Ubuntu:`)
  console.error(`  apt-get update && apt-get install -y ${[...new Set(missing.map(([, pkg]) => pkg))].join(' ')}`)
  process.exit(1)
}
