// Preloaded (`--import`) into the children of `npm start`'s launcher. They run in process groups of
// their own, so nothing else would stop them if the launcher itself were killed (SIGKILL, a crash):
// when the launcher is gone — this process was re-parented — stop gracefully, as on SIGTERM.
const CHECK_EVERY_MS = 1_000

const launcher = process.ppid
const watch = setInterval(() => {
  if (process.ppid === launcher) return
  clearInterval(watch)
  process.kill(process.pid, 'SIGTERM')
}, CHECK_EVERY_MS).unref()
