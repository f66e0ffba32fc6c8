// Watches a config directory and calls back once per burst of changes. Watching the directory
// (not the files) is what catches a Kubernetes ConfigMap update, which swaps the `..data` symlink
// in one rename, as well as editors that replace a file instead of writing it in place.
import { watch, type FSWatcher } from 'node:fs'

export const DEFAULT_WATCH_DEBOUNCE_MS = 150

export function watchDirectory (dir: string, onChange: () => void, debounceMs = DEFAULT_WATCH_DEBOUNCE_MS): () => void {
  let timer: NodeJS.Timeout | undefined
  const watcher: FSWatcher = watch(dir, { persistent: false }, () => {
    clearTimeout(timer)
    timer = setTimeout(onChange, debounceMs)
  })
  watcher.on('error', () => { /* the directory went away; the last good config stays in force */ })
  return () => {
    clearTimeout(timer)
    watcher.close()
  }
}
