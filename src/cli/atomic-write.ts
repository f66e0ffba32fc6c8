// Replaces a file so that a reader (a gateway's file watch, a ConfigMap-style reload) sees either
// the old text or the new one, never a half-written file: write a temp file in the same directory
// (same filesystem, so rename is atomic), fsync it, keep the original's mode, rename over it, then
// fsync the directory so the rename itself survives a crash.
import { randomBytes } from 'node:crypto'
import { closeSync, fsyncSync, openSync, renameSync, rmSync, statSync, writeSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'

export function writeFileAtomic (path: string, text: string): void {
  const dir = dirname(path)
  const temp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  let mode = 0o644
  try { mode = statSync(path).mode & 0o777 } catch { /* a new file: default mode */ }
  const fd = openSync(temp, 'wx', mode)
  try {
    writeSync(fd, text)
    fsyncSync(fd)
  } catch (err) {
    closeSync(fd)
    rmSync(temp, { force: true })
    throw err
  }
  closeSync(fd)
  try {
    renameSync(temp, path)
  } catch (err) {
    rmSync(temp, { force: true })
    throw err
  }
  try {
    const dirFd = openSync(dir, 'r')
    try { fsyncSync(dirFd) } finally { closeSync(dirFd) }
  } catch { /* some filesystems refuse fsync on a directory; the rename is done either way */ }
}
