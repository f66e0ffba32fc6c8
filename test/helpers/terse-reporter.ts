// `npm test`'s reporter (package.json "tap".reporter): the suite prints thousands of assertions, and a
// failure must be found without scrolling through them. One line per test file as it finishes
// (with the names of its failed checks), then, after the coverage summary, every failure in full
// (name, diff, source, stack) and the totals as the very last line:
//   totals: 4801 passed, 2 failed — 4803 checks in 77 files, 612.3 s
// .ci/run reads that line. It reads tap's raw TAP stream and writes plain lines as they come — no
// terminal redrawing — so a terminal, a pipe and a CI log show the same thing. Each file's full TAP
// stays in .tap/test-results/.
import { Transform, type TransformCallback } from 'node:stream'
import { Parser, type Result } from 'tap-parser'
import { stringify } from 'yaml'

interface Failure { name: string, diag: unknown }

/** `# { total: 4803, pass: 4801, fail: 2 }`, tap's closing comment: the assertion counts. */
function parseTotals (comment: string): Record<string, number> | undefined {
  const body = /^# \{ (.*) \}\s*$/.exec(comment)?.[1]
  if (body === undefined) return undefined
  return Object.fromEntries(body.split(', ').map((pair) => {
    const [key = '', value = ''] = pair.split(': ')
    return [key, Number(value)]
  }))
}

/**
 * A diag can hold what YAML cannot write: tap writes a function as `!function` (a FastifyError's
 * `fn`, say), which the parser reads back as a function, and yaml's stringify throws on it — the
 * reporter would die before the totals line. Written as `[function name]` instead.
 */
function plainValue (_key: unknown, value: unknown): unknown {
  if (typeof value === 'function') return `[function ${value.name === '' ? '(anonymous)' : value.name}]`
  return value
}

/** The diag with its diff first: what a reader looks for, before where and how. */
function diagText (diag: unknown): string {
  if (typeof diag !== 'object' || diag === null || !('diff' in diag)) return stringify(diag, plainValue, { lineWidth: 0 })
  const { diff, ...rest } = diag as { diff: unknown }
  return stringify({ diff, ...rest }, plainValue, { lineWidth: 0 })
}

function indent (text: string, by: string): string {
  return text.replace(/\n$/, '').split('\n').map((line) => by + line).join('\n')
}

export default class TerseReporter extends Transform {
  readonly #parser = new Parser()
  readonly #failures: Failure[] = []
  readonly #pending = new Map<string, Failure[]>()
  #files = 0
  #totals: Record<string, number> | undefined
  #seconds: number | undefined

  constructor () {
    super()
    this.#parser.on('child', (file: Parser) => this.#watchFile(file))
    this.#parser.on('assert', (result: Result) => this.#fileDone(result))
    this.#parser.on('comment', (comment: string) => {
      const totals = parseTotals(comment)
      const time = /^# time=([\d.]+)ms/.exec(comment)?.[1]
      if (totals !== undefined) this.#totals = totals
      else if (time !== undefined) this.#seconds = Number(time) / 1000
      else this.push(comment)
    })
    this.#parser.on('extra', (text: string) => this.push(text))
    this.#parser.on('bailout', (reason: string) => this.push(`Bail out! ${reason}\n`))
    this.#parser.on('complete', () => this.#summary())
  }

  /** A test file's parser: its failed checks, wherever they are nested, until the file's own result. */
  #watchFile (file: Parser): void {
    const failures: Failure[] = []
    const collect = (parser: Parser): void => {
      parser.on('child', collect)
      parser.on('assert', (result: Result) => {
        if (!result.ok && result.todo === false && result.skip === false) failures.push({ name: result.fullname, diag: result.diag })
      })
    }
    collect(file)
    this.#pending.set(file.name, failures)
  }

  /** A test file's result (after its TAP): one line, with the names of what failed in it. */
  #fileDone (result: Result): void {
    this.#files++
    const failures = this.#pending.get(result.name) ?? []
    this.#pending.delete(result.name)
    // A failed subtest is listed by the failures inside it; alone only when none is (a timeout, an error it threw).
    const leaves = failures.filter((f) => !failures.some((other) => other !== f && other.name.startsWith(`${f.name} > `)))
    const time = result.time === null ? '' : `  ${(result.time / 1000).toFixed(1)} s`
    if (result.ok && leaves.length === 0) {
      this.push(`ok   ${result.name}${time}\n`)
      return
    }
    // A file can fail with no failing check: it exited non-zero or was killed; its own result says how.
    const shown = leaves.length > 0 ? leaves : [{ name: result.fullname, diag: result.diag }]
    this.push(`FAIL ${result.name}${time}\n${shown.map((f) => `     ✖ ${f.name}\n`).join('')}`)
    this.#failures.push(...shown)
  }

  #summary (): void {
    if (this.#failures.length > 0) {
      this.push(`\n${this.#failures.length} ${this.#failures.length === 1 ? 'failure' : 'failures'}:\n`)
      for (const failure of this.#failures) {
        this.push(`\n✖ ${failure.name}\n`)
        if (failure.diag !== null && failure.diag !== undefined) this.push(`${indent(diagText(failure.diag), '    ')}\n`)
      }
    }
    const t = this.#totals
    const seconds = this.#seconds === undefined ? '' : `, ${this.#seconds.toFixed(1)} s`
    if (t === undefined) {
      this.push(`\ntotals: unknown (tap wrote none) — ${this.#files} files${seconds}\n`)
      return
    }
    const extra = ['skip', 'todo'].filter((k) => (t[k] ?? 0) > 0).map((k) => `, ${t[k] ?? 0} ${k === 'skip' ? 'skipped' : 'todo'}`).join('')
    this.push(`\ntotals: ${t.pass ?? 0} passed, ${t.fail ?? 0} failed${extra} — ${t.total ?? 0} ${t.total === 1 ? 'check' : 'checks'} in ${this.#files} ${this.#files === 1 ? 'file' : 'files'}${seconds}\n`)
  }

  override _transform (chunk: Buffer | string, _encoding: BufferEncoding, done: TransformCallback): void {
    this.#parser.write(chunk)
    done()
  }

  override _flush (done: TransformCallback): void {
    this.#parser.end()
    done()
  }
}
