// The file side of config loading, kept apart from the pure loader: reading CONFIG_DIR's three
// files, refusing at once what is not a regular file (a FIFO, a device, a directory: opening a FIFO
// for reading would wait for a writer, holding the parse worker and the process's exit), refusing a
// file over the size cap before reading it, and refusing a file that changed while it was read.
// Synchronous: the gateway runs it in the parse worker (worker-loader.ts) — or, for a small config before it serves
// anything, on its own thread — and the CLI on its own thread.
import { closeSync, constants, fstatSync, openSync, readSync, statSync, type Stats } from 'node:fs'
import { join } from 'node:path'
import { CONFIG_FILES, ConfigError, OPTIONAL_CONFIG_FILES, parseConfig, type ConfigFileName, type ConfigTexts, type OptionalConfigFileName } from './loader.js'
import type { ConfigSnapshot } from './types.js'

/** CONFIG_DIR: where plans.yaml, keys.yaml and routes.yaml are read from. */
export const DEFAULT_CONFIG_DIR = './config'
/**
 * CONFIG_MAX_BYTES: a config file bigger than this is refused before it is read or parsed (a reload
 * keeps the config in force). 100,000 keys in the canonical one-line form are a 10.6 MB keys.yaml
 * (≈ 106 bytes a key); 32 MiB holds about 300,000, so the key counts the docs promise load with room
 * to spare, while a runaway file (a log appended to the wrong path) is still refused by its size.
 */
export const DEFAULT_CONFIG_MAX_BYTES = 32 * 1024 * 1024

function formatBytes (n: number): string {
  return `${n.toLocaleString('en-US')} bytes`
}

function kindOf (stats: Stats): string {
  if (stats.isDirectory()) return 'a directory'
  if (stats.isFIFO()) return 'a FIFO'
  if (stats.isCharacterDevice()) return 'a character device'
  if (stats.isBlockDevice()) return 'a block device'
  if (stats.isSocket()) return 'a socket'
  return 'not a regular file'
}

/**
 * Reads one file. Opened without blocking (a FIFO opens at once, with no writer) and checked on the
 * open descriptor, so what is read is what was checked: a regular file, within `maxBytes` by its
 * size, then read up to `maxBytes` + 1 bytes (a file that grows meanwhile is refused as well), and
 * unchanged in size and modification time once read.
 */
function readCapped (path: string, file: ConfigFileName | OptionalConfigFileName, maxBytes: number): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)
  try {
    const before = fstatSync(fd)
    if (!before.isFile()) throw new ConfigError([`${file}: ${path} is ${kindOf(before)}, not a regular file`])
    const size = before.size
    const limit = `the limit of ${formatBytes(maxBytes)} (CONFIG_MAX_BYTES)`
    if (size > maxBytes) throw new ConfigError([`${file}: ${path} is ${formatBytes(size)}, over ${limit}`])
    const chunks: Buffer[] = []
    let length = 0
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(Math.max(size - length, 0), maxBytes - length) + 1)
      const n = readSync(fd, chunk, 0, chunk.length, null)
      if (n === 0) break
      chunks.push(chunk.subarray(0, n))
      length += n
      if (length > maxBytes) throw new ConfigError([`${file}: ${path} grew over ${limit} while being read`])
    }
    const after = fstatSync(fd)
    if (length !== size || after.size !== size || after.mtimeMs !== before.mtimeMs) {
      throw new ConfigError([`${file}: ${path} changed while being read (is something still writing it?)`])
    }
    return Buffer.concat(chunks, length).toString('utf8')
  } finally {
    closeSync(fd)
  }
}

/** The three files' texts, and webhooks.yaml's when it exists; a ConfigError naming every file that could not be read, and why. */
export function readConfigTexts (dir: string, maxBytes = DEFAULT_CONFIG_MAX_BYTES): ConfigTexts {
  const texts = {} as ConfigTexts
  const problems: string[] = []
  for (const file of CONFIG_FILES) {
    try {
      texts[file] = readCapped(join(dir, file), file, maxBytes)
    } catch (err) {
      if (err instanceof ConfigError) problems.push(...err.problems)
      else problems.push(`${file}: cannot read ${join(dir, file)}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`)
    }
  }
  for (const file of OPTIONAL_CONFIG_FILES) {
    try {
      texts[file] = readCapped(join(dir, file), file, maxBytes)
    } catch (err) {
      if (err instanceof ConfigError) problems.push(...err.problems)
      else if ((err as NodeJS.ErrnoException).code !== 'ENOENT') problems.push(`${file}: cannot read ${join(dir, file)}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`)
    }
  }
  if (problems.length > 0) throw new ConfigError(problems)
  return texts
}

/**
 * What the config files in `dir` hold on disk, by their sizes (a missing or unreadable one counts 0: reading it
 * reports it): how a load chooses its thread before anything is read (worker-loader.ts loadBeforeServing).
 */
export function configBytesOnDisk (dir: string): number {
  let bytes = 0
  for (const file of [...CONFIG_FILES, ...OPTIONAL_CONFIG_FILES]) {
    try {
      const stats = statSync(join(dir, file))
      if (stats.isFile()) bytes += stats.size
    } catch {
      // missing or unreadable: readConfigTexts says which, and why
    }
  }
  return bytes
}

export interface LoadOptions {
  loadedAt?: number
  /** CONFIG_MAX_BYTES: per file. */
  maxBytes?: number
  /** Problems reported at most (a ConfigError's list is capped). */
  maxProblems?: number
}

/**
 * Reads and validates a directory on this thread, in one step: for the CLI's key commands, tests, and the gateway's
 * load of a small config before it serves anything (worker-loader.ts; every other gateway load goes to the worker).
 */
export function loadConfigDir (dir: string, opts: LoadOptions = {}): ConfigSnapshot {
  // undefined secrets: the process's own, parseConfig's default
  return parseConfig(readConfigTexts(dir, opts.maxBytes), opts.loadedAt, undefined, opts.maxProblems)
}
