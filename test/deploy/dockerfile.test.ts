// The Dockerfile has the shape the image needs, checked without a Docker engine: multi-stage,
// production dependencies only, non-root, NODE_ENV=production, HEALTHCHECK on the admin port,
// tini + exec-form CMD for both roles, every COPY source present and not excluded by .dockerignore.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { DEFAULT_ADMIN_PORT, DEFAULT_GATEWAY_PORT } from '../../src/gateway/runtime/settings.js'
import { BACKEND_ENV, BACKEND_PORT, GATEWAY_ENV, parseDockerfile, ROOT, walk, type Instruction, type Json, type Stage } from '../helpers/deploy.js'

/** The exec (JSON) form of CMD / ENTRYPOINT / HEALTHCHECK CMD, or undefined for the shell form. */
function execForm (args: string): string[] | undefined {
  try {
    const value: unknown = JSON.parse(args)
    return Array.isArray(value) && value.every((v) => typeof v === 'string') ? value : undefined
  } catch {
    return undefined
  }
}

/** A .dockerignore pattern against a context path; excluding a directory excludes what it holds. */
function dockerignoreMatches (pattern: string, path: string): boolean {
  const regex = new RegExp('^' + pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*\*\/?/g, '§').replace(/\*/g, '[^/]*')
    .replace(/\?/g, '[^/]').replace(/§/g, '(.*/)?') + '(/.*)?$')
  return regex.test(path)
}

t.test('Dockerfile: multi-stage, production deps only, non-root, signals, healthcheck, both roles', async (t) => {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
  const { stages } = parseDockerfile(text)
  const runtime = stages.at(-1) as Stage
  const named = new Map(stages.filter((s) => s.name !== undefined).map((s) => [s.name as string, s]))
  const all = (stage: Stage, keyword: string): Instruction[] => stage.instructions.filter((i) => i.keyword === keyword)
  /** A stage's RUN lines including those of the stages it is built FROM. */
  const runsOf = (stage: Stage): string => {
    const parent = named.get(stage.image)
    return (parent === undefined ? '' : runsOf(parent) + '\n') + all(stage, 'RUN').map((i) => i.args).join('\n')
  }

  t.ok(stages.length >= 3, 'several stages')
  t.ok(stages.slice(0, -1).every((s) => s.name !== undefined), 'every stage but the last is named (FROM ... AS name)')
  t.match(runtime.image, /^node:24[\w.-]*-slim$/, 'runtime stage is a slim Node 24 image')
  const engines = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Json).engines.node as string
  t.equal(engines, '>=22.18', 'package.json engines: Node 22.18 (type stripping on by default, node:sqlite unflagged) or later')
  t.equal(readFileSync(join(ROOT, '.nvmrc'), 'utf8').trim(), '24', '.nvmrc names the images\' major')
  const baseImage = (stage: Stage): string => { const parent = named.get(stage.image); return parent === undefined ? stage.image : baseImage(parent) }
  for (const stage of stages) t.match(baseImage(stage), /^node:24-bookworm(-slim)?$/, `stage ${stage.name ?? 'runtime'} is on Node 24 (${baseImage(stage)})`)

  const build = stages.find((s) => /\bnpm ci\b(?![^\n]*--omit=dev)/.test(runsOf(s)) && /npm run build/.test(runsOf(s)))
  t.ok(build, 'a build stage installs all dependencies (npm ci) and runs npm run build')
  const prodDeps = stages.find((s) => /npm ci --omit=dev/.test(runsOf(s)))
  t.ok(prodDeps, 'a stage installs production dependencies only (npm ci --omit=dev)')
  t.match(runsOf(prodDeps as Stage), /--omit=optional/, 'without the Node binary npm ci brings for older machines: the image has its own Node 24')
  t.match(runsOf(prodDeps as Stage), /require\('node:sqlite'\)/, 'and checks that the image\'s Node has node:sqlite, failing the build if not')
  t.notMatch(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'), /better-sqlite3|g\+\+|python3/, 'no native addon, so no compiler in any stage')
  t.notMatch(all(runtime, 'RUN').map((i) => i.args).join('\n'), /npm (ci|install)|g\+\+|python3/, 'runtime stage installs no packages with npm and no compilers')

  const copies = all(runtime, 'COPY').map((i) => i.args)
  t.ok(copies.some((c) => c.includes(`--from=${prodDeps?.name}`) && /\/app\/node_modules/.test(c)), 'runtime takes node_modules from the production-deps stage')
  t.ok(copies.some((c) => c.includes(`--from=${build?.name}`) && /\/app\/dist/.test(c)), 'runtime takes dist/ from the build stage')
  t.ok(copies.some((c) => /\bpackage\.json\b/.test(c) && !c.includes('--from')), 'runtime has package.json ("type": "module" for dist/)')
  // tsc emits only JavaScript: every other file under src/ (read at run time) must be copied to dist/.
  const assets = new Set(walk(join(ROOT, 'src')).filter((p) => !p.endsWith('.ts')).map((p) => p.slice(p.lastIndexOf('.'))))
  for (const ext of assets) {
    t.ok(runsOf(build as Stage).includes(`'*${ext}'`), `the build copies src/**/*${ext} beside the compiled code`)
  }

  const env = all(runtime, 'ENV').map((i) => i.args).join(' ')
  t.match(env, /\bNODE_ENV=production\b/, 'NODE_ENV=production')
  t.match(env, new RegExp(`\\bGATEWAY_PORT=${DEFAULT_GATEWAY_PORT}\\b`), 'GATEWAY_PORT is the app default')
  t.match(env, new RegExp(`\\bADMIN_PORT=${DEFAULT_ADMIN_PORT}\\b`), 'ADMIN_PORT is the app default')
  for (const [, name] of env.matchAll(/\b([A-Z_]+)=/g)) {
    t.ok(GATEWAY_ENV.has(name as string) || BACKEND_ENV.has(name as string), `ENV ${name} is read by the app`)
  }

  const user = all(runtime, 'USER').at(-1)?.args
  t.ok(user !== undefined && user !== '' && !/^(root|0)(:|$)/.test(user), `runtime USER is not root (${user})`)
  t.match(user, /^[1-9]\d*(:\d+)?$/, 'USER is numeric, so Kubernetes can verify runAsNonRoot')

  const entrypoint = execForm(all(runtime, 'ENTRYPOINT').at(-1)?.args ?? '')
  const cmd = execForm(all(runtime, 'CMD').at(-1)?.args ?? '')
  t.same(entrypoint, ['/usr/bin/tini', '--'], 'ENTRYPOINT is tini in exec form (PID 1 forwards SIGTERM, reaps zombies)')
  t.match(runsOf(runtime), /apt-get install[^\n]*\btini\b/, 'tini is installed in the runtime stage')
  t.same(cmd, ['node', 'dist/gateway/server.js'], 'CMD is the gateway role, exec form: node receives SIGTERM itself (no shell, no npm)')
  t.match(text, /node dist\/backend\/server\.js/, 'the backend role (same image, other command) is documented')
  for (const role of ['gateway', 'backend']) {
    t.ok(existsSync(join(ROOT, 'src', role, 'server.ts')), `src/${role}/server.ts exists (→ dist/${role}/server.js)`)
  }
  const buildConfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as Json
  t.same([buildConfig.compilerOptions.rootDir, buildConfig.compilerOptions.outDir], ['src', 'dist'], 'tsc maps src/ to dist/')

  const healthcheck = all(runtime, 'HEALTHCHECK').at(-1)?.args ?? ''
  const probe = execForm(healthcheck.replace(/^(--\S+\s+)*CMD\s+/, ''))
  t.ok(probe !== undefined && probe[0] === 'node', 'HEALTHCHECK runs node in exec form (no curl in a slim image)')
  t.match(probe?.join(' '), /ADMIN_PORT \|\| 9091[\s\S]*\/healthz/, 'HEALTHCHECK calls /healthz on the admin port (ADMIN_PORT, default 9091)')
  t.equal(DEFAULT_ADMIN_PORT, 9091, 'the admin port default the HEALTHCHECK falls back to is the app default')

  const exposed = all(runtime, 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map(Number).sort()
  t.same(exposed, [BACKEND_PORT, DEFAULT_GATEWAY_PORT, DEFAULT_ADMIN_PORT].sort(), 'EXPOSE gateway, admin and backend ports')

  // Every COPY source from the build context exists and is not excluded by .dockerignore.
  const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  for (const needed of ['**/node_modules', 'dist', '.git', 'data', '**/.env', 'coverage', 'test']) {
    t.ok(ignore.includes(needed), `.dockerignore excludes ${needed}`)
  }
  const sources = stages.flatMap((s) => all(s, 'COPY')).filter((i) => !i.args.includes('--from'))
    .flatMap((i) => i.args.split(/\s+/).filter((a) => !a.startsWith('--')).slice(0, -1))
  t.ok(sources.length > 0, 'COPY from the context')
  for (const source of sources) {
    t.ok(existsSync(join(ROOT, source)), `COPY source ${source} exists`)
    const excluded = ignore.some((p) => !p.startsWith('!') && dockerignoreMatches(p, source))
    t.notOk(excluded, `COPY source ${source} is not excluded by .dockerignore`)
  }
})
