// The `pretest` step (test/helpers/prerequisites.ts) on a machine that lacks redis-server (or
// kubectl): run as root it installs exactly the missing package with apt-get; run as an
// unprivileged user it names the package (and the Homebrew equivalent) and exits 1. The machine's
// tools are hidden behind a PATH of stand-ins, and apt-get is a stand-in script that records its
// arguments (and, for `install`, puts a stand-in of each package's binary on the PATH, as the real
// package would).
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { CHILD_ENV, REPO_ROOT } from '../helpers/processes.js'

const STEP = join(REPO_ROOT, 'test', 'helpers', 'prerequisites.ts')
const IS_ROOT = process.getuid?.() === 0

function script (path: string, body: string): void {
  writeFileSync(path, `#!/bin/sh\n${body}\n`)
  chmodSync(path, 0o755)
}

interface Machine { bin: string, chromium: string, aptLog: string }

/** A directory of stand-ins for every tool but redis-server (and kubectl, if asked), and an apt-get that records its calls. */
function machine (t: Test, opts: { withRedisServer?: boolean, withoutKubectl?: boolean } = {}): Machine {
  const dir = t.testdir()
  chmodSync(dir, 0o755)
  const bin = join(dir, 'bin')
  mkdirSync(bin)
  chmodSync(bin, 0o755)
  for (const tool of ['redis-cli', 'promtool', ...(opts.withoutKubectl === true ? [] : ['kubectl'])]) script(join(bin, tool), 'exit 0')
  if (opts.withRedisServer === true) script(join(bin, 'redis-server'), 'exit 0')
  const chromium = join(dir, 'chromium')
  script(chromium, 'exit 0')
  const aptLog = join(dir, 'apt-get.log')
  script(join(bin, 'apt-get'), [
    `echo "$*" >> '${aptLog}'`,
    'if [ "$1" = install ]; then for p in "$@"; do case "$p" in',
    `  redis-server) printf '#!/bin/sh\\nexit 0\\n' > '${bin}/redis-server'; /bin/chmod 755 '${bin}/redis-server' ;;`,
    `  kubernetes-client) printf '#!/bin/sh\\nexit 0\\n' > '${bin}/kubectl'; /bin/chmod 755 '${bin}/kubectl' ;;`,
    'esac; done; fi'
  ].join('\n'))
  return { bin, chromium, aptLog }
}

/** Runs the step with only the stand-ins on PATH, as root or as `nobody`. */
function runStep (m: Machine, as: 'root' | 'nobody'): { status: number | null, output: string } {
  const node = [process.execPath, '--import', 'tsx', STEP]
  // As root: directly when the suite is root, else in a user namespace where this user is uid 0.
  // As nobody: setpriv drops to uid/gid 65534, as a developer's unprivileged shell would be.
  const argv = as === 'root'
    ? (IS_ROOT ? node : ['/usr/bin/unshare', '--map-root-user', ...node])
    : (IS_ROOT ? ['/usr/bin/setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', ...node] : node)
  const [command, ...args] = argv as [string, ...string[]]
  const result = spawnSync(command, args, {
    cwd: REPO_ROOT,
    env: { ...CHILD_ENV, PATH: m.bin, CHROMIUM_PATH: m.chromium, HOME: '/tmp' },
    encoding: 'utf8'
  })
  return { status: result.status, output: `${result.stdout}${result.stderr}` }
}

t.test('as root with apt-get: one update, then an install of exactly the missing package', async (t) => {
  const m = machine(t)
  const { status, output } = runStep(m, 'root')
  t.equal(status, 0, output)
  t.equal(readFileSync(m.aptLog, 'utf8'), 'update -qq\ninstall -y -qq redis-server\n')
  t.match(output, /^npm test: installing redis-server with apt-get \(redis-server: limiter tests run real Redis servers\)$/m)
  t.equal(output.trim().split('\n').length, 1, 'one line says what is installed and why')
})

t.test('without kubectl, as root: Debian\'s kubernetes-client is installed (kubectl with kustomize built in)', async (t) => {
  const m = machine(t, { withRedisServer: true, withoutKubectl: true })
  const { status, output } = runStep(m, 'root')
  t.equal(status, 0, output)
  t.equal(readFileSync(m.aptLog, 'utf8'), 'update -qq\ninstall -y -qq kubernetes-client\n')
  t.match(output, /^npm test: installing kubernetes-client with apt-get \(kubectl: the Kubernetes overlays are rendered with kubectl kustomize\)$/m)
})

t.test('as an unprivileged user: names the package and the Homebrew equivalent, exits 1, installs nothing', async (t) => {
  const m = machine(t)
  const { status, output } = runStep(m, 'nobody')
  t.equal(status, 1)
  t.match(output, 'npm test needs redis-server, which this machine lacks')
  t.match(output, 'apt-get update && apt-get install -y redis-server\n')
  t.match(output, 'brew install redis')
  t.notOk(existsSync(m.aptLog), 'apt-get was not called')
})

t.test('nothing missing: exits 0 without calling apt-get', async (t) => {
  const m = machine(t, { withRedisServer: true })
  const { status, output } = runStep(m, 'root')
  t.equal(status, 0)
  t.equal(output, '')
  t.notOk(existsSync(m.aptLog))
})
