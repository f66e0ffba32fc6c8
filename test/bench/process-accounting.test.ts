// The accounting records bench/suite-cpu.ts reads: the acct(5) v3 layout taken apart field by field,
// comp_t's base-8 exponent, and each process's CPU put on the test file its tree began at.
import t from 'tap'
import { compT, cpuPerFile, parseAccounting } from '../../bench/lib/process-accounting.js'

/** A v3 record as the kernel writes it: `ticks` of user and of system time in comp_t form. */
function record (fields: { pid: number, parentPid: number, command: string, userTicks: number, systemTicks: number, exitCode?: number }): Buffer {
  const bytes = Buffer.alloc(64)
  bytes.writeUInt8(0, 0)
  bytes.writeUInt8(3, 1)
  bytes.writeUInt32LE(fields.exitCode ?? 0, 4)
  bytes.writeUInt32LE(fields.pid, 16)
  bytes.writeUInt32LE(fields.parentPid, 20)
  bytes.writeUInt16LE(fields.userTicks, 32)
  bytes.writeUInt16LE(fields.systemTicks, 34)
  bytes.write(fields.command, 48, 16, 'latin1')
  return bytes
}

t.test('comp_t: 13 bits of mantissa, a base-8 exponent above them', async (t) => {
  t.equal(compT(0), 0)
  t.equal(compT(8191), 8191, 'the largest without an exponent')
  t.equal(compT((1 << 13) | 1000), 8000, 'exponent 1: times 8')
  t.equal(compT((3 << 13) | 5), 5 * 512, 'exponent 3: times 512')
})

t.test('each record: pid, parent, exit code, command, user + system CPU in seconds', async (t) => {
  const parsed = parseAccounting(Buffer.concat([
    record({ pid: 4321, parentPid: 1000, command: 'redis-server', userTicks: 150, systemTicks: 25, exitCode: 9 }),
    record({ pid: 4322, parentPid: 4321, command: 'MainThread0123456789', userTicks: (1 << 13) | 1000, systemTicks: 0 })
  ]))
  t.same(parsed[0], { pid: 4321, parentPid: 1000, command: 'redis-server', cpuSeconds: 1.75, exitCode: 9 })
  t.equal(parsed[1]!.command, 'MainThread012345', 'a full 16-byte name has no terminator: all 16 bytes')
  t.equal(parsed[1]!.cpuSeconds, 80, '8,000 ticks')
  t.same(parseAccounting(Buffer.alloc(63)), [], 'a partial record (the kernel still writing) is not read')
  const older = record({ pid: 1, parentPid: 0, command: 'x', userTicks: 0, systemTicks: 0 })
  older.writeUInt8(2, 1)
  t.throws(() => parseAccounting(older), /version 2, not 3/, 'another layout is refused, not misread')
})

t.test('a process counts for the outermost ancestor that ran a test file; the rest is outside', async (t) => {
  const processes = [
    { pid: 10, parentPid: 1, command: 'node', cpuSeconds: 2, exitCode: 0 }, // the runner
    { pid: 20, parentPid: 10, command: 'MainThread', cpuSeconds: 3, exitCode: 0 }, // test a
    { pid: 21, parentPid: 20, command: 'redis-server', cpuSeconds: 1.5, exitCode: 0 },
    { pid: 22, parentPid: 21, command: 'sh', cpuSeconds: 0.25, exitCode: 0 }, // a grandchild of test a
    { pid: 30, parentPid: 10, command: 'MainThread', cpuSeconds: 4, exitCode: 0 }, // test b
    { pid: 31, parentPid: 30, command: 'MainThread', cpuSeconds: 1, exitCode: 0 }, // a fixture's test file, run by test b:
    { pid: 32, parentPid: 31, command: 'MainThread', cpuSeconds: 0.5, exitCode: 0 } // its tree is test b's
  ]
  const files = cpuPerFile(processes, new Map([[20, 'test/a.test.ts'], [30, 'test/b.test.ts'], [31, 'fixture/x.test.ts']]))
  t.same(files.map((entry) => [entry.file, entry.cpuSeconds, entry.processes]), [
    ['test/a.test.ts', 4.75, 3],
    ['test/b.test.ts', 5.5, 3],
    ['(outside)', 2, 1]
  ].sort((x, y) => (y[1] as number) - (x[1] as number)), 'largest first')
  t.same(files.find((entry) => entry.file === 'test/a.test.ts')!.byCommand, [['MainThread', 3], ['redis-server', 1.5], ['sh', 0.25]])
})
