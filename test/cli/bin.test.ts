// `npx petstore-gateway` in a checkout: package.json's bin (bin/petstore-gateway.js) runs the
// compiled CLI after a build and the TypeScript source before one, so it works straight after
// `npm ci`. Run here through the real npx, as a user would.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { dirname } from 'node:path'
import t from 'tap'
import { CHILD_ENV, REPO_ROOT } from '../helpers/processes.js'

async function npx (args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  const child = spawn('npx', ['--no-install', 'petstore-gateway', ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...CHILD_ENV, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  return { code, stdout, stderr }
}

t.test('npx petstore-gateway runs the CLI from a checkout', async (t) => {
  const key = 'psk_bin_test_0123456789'
  const hashed = await npx(['keys', 'hash', key])
  t.equal(hashed.code, 0, 'exits 0')
  t.equal(hashed.stdout.trim(), createHash('sha256').update(key).digest('hex'))
  const unknown = await npx(['no-such-command'])
  t.equal(unknown.code, 1, 'an unknown command fails with exit 1')
  // npm may add its own warnings to stderr; ours is one line, without the whole usage.
  t.match(unknown.stderr, /^petstore-gateway: unknown command "no-such-command" \(petstore-gateway --help lists the commands\)$/m)
  t.notMatch(unknown.stdout + unknown.stderr, 'usage:')
  const bare = await npx([])
  t.equal(bare.code, 2, 'nothing asked: exit 2')
  t.match(bare.stderr, 'usage: petstore-gateway <command>', 'the usage, on stderr')
  t.equal(bare.stdout, '')
})
