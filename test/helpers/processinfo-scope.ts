// Loaded first in every test process tap starts (tap's `test-env` NODE_OPTIONS, ahead of the process-info
// hook tap appends), to narrow what that hook (@tapjs/processinfo) records to the project's own files. tap's
// runner asks it to record every module a test process loads, node_modules included: for each one it reads
// the file and counts its line lengths, and it parses the source maps the packages ship. None of it is used:
// coverage already leaves node_modules out (tap sets that filter separately), and the record only serves
// tap's `--changed` runs. With the packages left out a one-check test file costs about half the CPU (the
// figures: docs/development.md, "tap's process-info hook").
//
// The record is then started here, at once: the hook starts it (and V8's coverage with it) at the first
// module it records, and on Node ≥ 24.13, where it hooks modules synchronously, that first module is now one of
// ours, loaded from inside its own load hook — started there, the record was never written and the run had
// no coverage (measured). getProcessInfo is the hook's own start, not in its package's exports: named by path.
// Last, it takes itself out of NODE_OPTIONS, so the processes a test starts (cwd elsewhere) never look for it.
process.env._TAPJS_PROCESSINFO_EXCLUDE_ = String(/(^(node|tapmock):|[\\/](\.tap|tap-snapshots|node_modules)[\\/])/)

interface ProcessInfoModule { getProcessInfo: () => unknown }
const processInfo = await import(new URL('../../node_modules/@tapjs/processinfo/dist/esm/get-process-info.js', import.meta.url).href) as ProcessInfoModule
processInfo.getProcessInfo()

process.env.NODE_OPTIONS = (process.env.NODE_OPTIONS ?? '').replace(/"?--import[= ]\S*processinfo-scope\.ts"?/g, '').replace(/\s+/g, ' ').trim()
