// How the command line explains itself: nothing asked → the list of commands on stderr and exit 2;
// `--help` at every level → its text on stdout and exit 0; any mistake → one line on stderr naming
// where the help is, and exit 1.
import t from 'tap'
import { COMMANDS, commandUsage, groupUsage, usage } from '../../src/cli/usage.js'
import { cli, cliInProcess } from '../helpers/cli.js'

t.test('no arguments: the usage on stderr, exit 2 (a real process, as the bin runs it)', async (t) => {
  const res = await cli([])
  t.same(res, { code: 2, stdout: '', stderr: `${usage()}\n` })
  for (const command of COMMANDS) t.match(res.stderr, `  ${command.name} `, `lists ${command.name}`)
})

t.test('--help, -h and help: the usage on stdout, exit 0', async (t) => {
  for (const flag of ['--help', '-h', 'help']) {
    t.same(await cliInProcess([flag]), { code: 0, stdout: `${usage()}\n`, stderr: '' }, flag)
  }
})

t.test('every subcommand answers --help with its own usage on stdout, exit 0, and does nothing else', async (t) => {
  for (const command of COMMANDS) {
    const words = command.name.split(' ')
    const res = await cliInProcess([...words, '--help'])
    t.same(res, { code: 0, stdout: `${commandUsage(command)}\n`, stderr: '' }, command.name)
    t.match(res.stdout, new RegExp(`^usage: petstore-gateway ${command.name} `), `${command.name}: starts with its usage line`)
  }
  // Even after other arguments (which are not acted on): no key is made, no gateway is called.
  const create = await cliInProcess(['keys', 'create', '--id', 'x', '--plan', 'pro', '-h'])
  t.same(create, { code: 0, stdout: `${commandUsage(COMMANDS[0]!)}\n`, stderr: '' })
  t.notMatch(create.stdout, /psk_/)
})

t.test('every group answers --help with its commands', async (t) => {
  for (const group of ['keys', 'config', 'bans']) {
    const res = await cliInProcess([group, '--help'])
    t.same(res, { code: 0, stdout: `${groupUsage(group) ?? 'missing'}\n`, stderr: '' }, group)
    const names = COMMANDS.filter((c) => c.name.startsWith(`${group} `)).map((c) => c.name)
    t.ok(names.length > 0 && names.every((name) => res.stdout.includes(`  ${name} `)), `${group}: ${names.join(', ')}`)
  }
})

t.test('mistakes are one line on stderr and exit 1', async (t) => {
  for (const [args, line] of [
    [['frobnicate'], 'unknown command "frobnicate" (petstore-gateway --help lists the commands)'],
    [['frobnicate', '--help'], 'unknown command "frobnicate" (petstore-gateway --help lists the commands)'],
    [['keys'], 'keys needs a command: create, rotate, hash, show, usage, reset (petstore-gateway keys --help)'],
    [['keys', 'delete', 'x'], 'unknown command "keys delete" (petstore-gateway keys --help lists its commands)'],
    [['bans'], 'bans needs a command: list, lift (petstore-gateway bans --help)'],
    [['keys', 'show'], 'keys show needs exactly one id (petstore-gateway keys show --help)'],
    [['keys', 'show', 'a', 'b'], 'keys show needs exactly one id (petstore-gateway keys show --help)'],
    [['keys', 'rotate', '--id', 'demo-pro', '--grace'], 'keys rotate: --grace needs a value (petstore-gateway keys rotate --help)'],
    [['keys', 'reset', 'demo-pro', '--force'], 'keys reset: unknown option --force (petstore-gateway keys reset --help)'],
    [['keys', 'show', 'demo-pro', '--json=yes'], 'keys show: --json takes no value (petstore-gateway keys show --help)'],
    [['keys', 'create', '--id', 'x', '--plan', 'pro', 'extra'], 'keys create: unexpected argument "extra" (petstore-gateway keys create --help)']
  ] as const) {
    t.same(await cliInProcess([...args]), { code: 1, stdout: '', stderr: `petstore-gateway: ${line}\n` }, args.join(' '))
  }
})
