// Watches a config directory and calls back once the directory has been quiet — no change seen —
// for a stated period after a burst of changes. Watching the directory (not the files) is what
// catches a Kubernetes ConfigMap update, which swaps the `..data` symlink in one rename, as well as
// editors that replace a file instead of writing it in place. The quiet period is what keeps a file
// caught mid-write from being applied: a writer that pauses within it restarts the wait, so the
// reload reads the file once the writer is done (docs/decisions.md §8).
import { watch, type FSWatcher } from 'node:fs'

/** CONFIG_QUIET_MS: a change is applied once the directory has seen no other change for this long. */
export const DEFAULT_CONFIG_QUIET_MS = 2_000

export function watchDirectory (dir: string, onQuiet: () => void, quietMs = DEFAULT_CONFIG_QUIET_MS): () => void {
  let timer: NodeJS.Timeout | undefined
  const watcher: FSWatcher = watch(dir, { persistent: false }, () => {
    clearTimeout(timer)
    timer = setTimeout(onQuiet, quietMs)
  })
  watcher.on('error', () => { /* the directory went away; the last good config stays in force */ })
  return () => {
    clearTimeout(timer)
    watcher.close()
  }
}
