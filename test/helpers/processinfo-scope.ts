// Loaded first in every test process tap starts (tap's `test-env` NODE_OPTIONS, ahead of the process-info
// hook tap appends), to narrow what that hook records to the project's own files. tap's runner asks the hook
// to record every module a test process loads, node_modules included: for each one it reads the file, counts
// its line lengths and, if the file names a source map, turns on source-map parsing, which then parses the
// maps of every package tap and the gateway ship with. None of it is used: coverage already leaves node_modules
// out (tap sets that filter separately), and the record serves only tap's `--changed` runs. With the packages
// left out of the record a one-check test file costs about half the CPU (the figures: docs/development.md).
// It then takes itself out of NODE_OPTIONS, so the processes a test starts (cwd elsewhere) never look for it.
process.env._TAPJS_PROCESSINFO_EXCLUDE_ = String(/(^(node|tapmock):|[\\/](\.tap|tap-snapshots|node_modules)[\\/])/)
process.env.NODE_OPTIONS = (process.env.NODE_OPTIONS ?? '').replace(/"?--import[= ]\S*processinfo-scope\.ts"?/g, '').replace(/\s+/g, ' ').trim()
