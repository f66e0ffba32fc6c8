import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import t from 'tap'
import { REQUIRED_NODE, runtimeProblem } from '../../src/shared/runtime-guard.js'
import { CHILD_ENV, REPO_ROOT, TS_NODE_ARGS } from '../helpers/processes.js'

t.test('Node 22.18 and later are supported; anything older is refused in one line naming the version it needs', async (t) => {
  for (const supported of ['22.18.0', '22.23.3', '24.1.0', '26.10.0']) t.equal(runtimeProblem(supported), undefined, supported)
  for (const old of ['20.20.2', '22.12.0', '22.17.1', '18.19.1', '21.7.3']) {
    const problem = runtimeProblem(old)
    t.match(problem, new RegExp(`needs Node\\.js ${REQUIRED_NODE.major}\\.${REQUIRED_NODE.minor} or later, and this is ${old.replaceAll('.', '\\.')}`), old)
    t.notMatch(problem, /\n/)
  }
})

// The real entry points, started on the project's Node made to report an old version before anything
// else loads: each stops at once with the one line and exit code 1, before it listens or reads config.
const PRETEND_NODE_20 = 'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"20.20.2"})'
for (const entry of ['src/gateway/server.ts', 'src/backend/server.ts', 'src/cli/start.ts', 'src/cli/main.ts', 'test/helpers/prerequisites.ts']) {
  t.test(`${entry} refuses to start on Node 20`, async (t) => {
    const run = spawnSync(process.execPath, ['--import', PRETEND_NODE_20, ...TS_NODE_ARGS, join(REPO_ROOT, entry)], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 20_000,
      // CHILD_ENV: these children collect no coverage (test/helpers/processes.ts).
      env: { ...process.env, ...CHILD_ENV, GATEWAY_PORT: '0', ADMIN_PORT: '0', BACKEND_PORT: '0' }
    })
    t.equal(run.status, 1)
    t.equal(run.stdout, '')
    t.equal(run.stderr, `${runtimeProblem('20.20.2') ?? ''}\n`)
  })
}
