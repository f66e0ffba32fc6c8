// Regression (issue 26, finding 10): a YAML alias bomb at start-up or in `config check` printed a raw
// ReferenceError stack with no file name, while a reload rejected it cleanly. Start-up, reload and
// `config check` now load through the same code and print the same problem list, naming the file,
// for it and for every other parse failure (syntax, nesting too deep for the parser).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { cliInProcess } from '../../helpers/cli.js'
import { startGateway } from '../../helpers/gateway.js'
import { fixtureConfigCopy } from '../../helpers/config-fixture.js'
import { freePort } from '../../helpers/ports.js'
import { gatewayProcessEnv, runEntry } from '../../helpers/processes.js'

/** Nine levels of nine aliases: 9^10 strings once expanded. */
function aliasBomb (): string {
  const lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
  for (let i = 1; i < 10; i++) {
    const name = String.fromCharCode(97 + i)
    lines.push(`${name}: &${name} [${Array(9).fill(`*${String.fromCharCode(96 + i)}`).join(',')}]`)
  }
  return lines.join('\n') + '\nkeys: *j\n'
}

const FAILURES: Record<string, { file: 'keys.yaml' | 'routes.yaml', text: string, problems: Array<string | RegExp> }> = {
  'an alias bomb': {
    file: 'keys.yaml',
    text: aliasBomb(),
    problems: ['keys.yaml: YAML that cannot be read: Excessive alias count indicates a resource exhaustion attack']
  },
  'nesting deeper than the parser goes': {
    file: 'routes.yaml',
    text: 'routes: ' + '['.repeat(20_000) + '\n',
    // Where the parser runs out of stack depends on the thread's stack size: any column (a reload parses in the worker,
    // start-up and config check on their own thread: sameProblems below reads the column as any). 20,000 levels is past
    // every thread's (the main thread's ends near 1,000); 100,000 cost 5 s more of the coverage-instrumented parser.
    problems: [/^routes\.yaml: malformed YAML at line 1, column \d+: Maximum call stack size exceeded$/]
  },
  'a syntax error': {
    file: 'keys.yaml',
    text: 'keys:\n  - { id: a\n',
    problems: ['keys.yaml: malformed YAML at line 3, column 1: Flow map in block collection must be sufficiently indented and end with a }']
  }
}

/** The problems as the three paths must agree on them: where a stack ran out is the thread's, not the file's. */
function sameProblems (problems: readonly string[]): string[] {
  return problems.map((problem) => problem.replace(/column \d+: Maximum call stack size exceeded$/, 'column (any): Maximum call stack size exceeded'))
}

function dirWith (t: Test, file: string, text: string): string {
  const dir = fixtureConfigCopy(t)
  writeFileSync(join(dir, file), text)
  return dir
}

for (const [name, failure] of Object.entries(FAILURES)) {
  t.test(`${name}: reload, config check and start-up print the same problems, naming the file, no stack`, async (t) => {
    const good = fixtureConfigCopy(t)
    const gw = await startGateway(t, { reload: { dir: good, watch: false } })
    writeFileSync(join(good, failure.file), failure.text)
    const reload = await gw.app.configReloader.reload('test')
    const problems = reload.ok ? [] : [...reload.problems]
    t.match(problems, failure.problems, 'reload')
    t.equal(problems.length, failure.problems.length)

    const check = await cliInProcess(['config', 'check', dirWith(t, failure.file, failure.text)])
    t.equal(check.code, 1)
    t.same(sameProblems(check.stderr.split('\n').filter((line) => line !== '')), sameProblems(problems), 'config check: the same problems')

    const env = gatewayProcessEnv({ port: await freePort(), adminPort: await freePort(), backendUrl: `http://127.0.0.1:${await freePort()}`, configDir: dirWith(t, failure.file, failure.text) })
    const proc = runEntry(t, 'src/gateway/server.ts', env)
    t.equal((await proc.exited).code, 1, 'start-up refuses it')
    const fatal = proc.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number, msg: string }).filter((l) => l.level === 60)
    t.same(sameProblems(fatal.map((l) => l.msg)), sameProblems(problems), 'start-up: the same problems, one fatal line each')
    t.notMatch(proc.output(), /\n\s+at |ReferenceError|RangeError/, 'no stack trace, no raw error')
  })
}
