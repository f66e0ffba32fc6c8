// Where a process allocates, garbage included: Node's --heap-prof keeps only what is still live when it
// writes, so the short-lived objects a request leaves behind (what the garbage collector's share is made
// of) never show there. Preloaded into a measured process (`node --import <this file>`) with
// HEAP_SAMPLING_FILE set, it starts V8's sampling heap profiler — with the objects collected by minor and
// major GCs kept — at once, or with HEAP_SAMPLING_ON=SIGUSR2 when the process gets that signal (so
// start-up and warm-up are left out: bench/profile.ts, PROFILE_HEAP=1, sends it as its measured run
// begins), and writes the profile when the process exits; `summarizeAllocations` reads it.
// HEAP_SAMPLING_INTERVAL: bytes between samples (default 32 KiB).
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'

interface AllocationNode { callFrame: { functionName: string, url: string, lineNumber: number }, selfSize: number, children: AllocationNode[] }
export interface AllocationProfile { head: AllocationNode }

/** Bytes allocated per frame (self, `function file:line`), and in all. */
function allocationSites (profile: AllocationProfile): { bySite: Map<string, number>, total: number } {
  const bySite = new Map<string, number>()
  let total = 0
  const visit = (node: AllocationNode): void => {
    if (node.selfSize > 0) {
      const frame = node.callFrame
      const file = frame.url.replace(/^.*node_modules\//, '').replace(/^.*\/src\//, 'src/').replace(/^file:\/\//, '')
      const site = `${frame.functionName === '' ? '(anonymous)' : frame.functionName} ${file === '' ? '' : `${file}:${frame.lineNumber + 1}`}`.trim()
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize)
      total += node.selfSize
    }
    for (const child of node.children) visit(child)
  }
  visit(profile.head)
  return { bySite, total }
}

/**
 * Bytes per request by allocating file (line numbers dropped: an edit moves them), before and after, for the files
 * whose name contains one of `files` (all when empty), largest change first: markdown lines.
 */
export function compareAllocations (before: AllocationProfile, after: AllocationProfile, requests: number, files: readonly string[] = []): string[] {
  const byFile = (profile: AllocationProfile): Map<string, number> => {
    const out = new Map<string, number>()
    for (const [site, bytes] of allocationSites(profile).bySite) {
      const name = site.replace(/:\d+$/, '')
      if (files.length === 0 || files.some((f) => name.includes(f))) out.set(name, (out.get(name) ?? 0) + bytes)
    }
    return out
  }
  const b = byFile(before)
  const a = byFile(after)
  const rows = [...new Set([...b.keys(), ...a.keys()])].map((k) => [k, (b.get(k) ?? 0) / requests, (a.get(k) ?? 0) / requests] as const)
  const sum = (m: Map<string, number>): number => [...m.values()].reduce((x, y) => x + y, 0) / requests
  return ['| bytes per request | before | after | after − before |', '|---|---:|---:|---:|',
    ...rows.sort((x, y) => Math.abs(y[2] - y[1]) - Math.abs(x[2] - x[1])).slice(0, 30).map(([k, x, y]) => `| \`${k}\` | ${x.toFixed(0)} | ${y.toFixed(0)} | ${(y - x).toFixed(0)} |`),
    `| **these frames in all** | **${sum(b).toFixed(0)}** | **${sum(a).toFixed(0)}** | **${(sum(a) - sum(b)).toFixed(0)}** |`]
}

/** Bytes allocated per frame (self), largest first, with each one's share: markdown lines. */
export function summarizeAllocations (profile: AllocationProfile, requests: number, top = 25): string[] {
  const { bySite, total } = allocationSites(profile)
  const lines = [`Sampled allocations, garbage included: ${(total / 1e6).toFixed(1)} MB in all, ${(total / Math.max(1, requests)).toFixed(0)} bytes per request.`, '',
    '| bytes per request | share | allocating frame |', '|---:|---:|---|']
  for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    lines.push(`| ${(bytes / Math.max(1, requests)).toFixed(0)} | ${(100 * bytes / total).toFixed(1)} % | \`${site}\` |`)
  }
  return lines
}

const file = process.env.HEAP_SAMPLING_FILE
if (file !== undefined && file !== '') {
  const session = new Session()
  session.connect()
  session.post('HeapProfiler.enable')
  const start = (): void => {
    session.post('HeapProfiler.startSampling', {
      samplingInterval: Number(process.env.HEAP_SAMPLING_INTERVAL ?? 32_768),
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true
    })
  }
  if (process.env.HEAP_SAMPLING_ON === 'SIGUSR2') process.once('SIGUSR2', start)
  else start()
  // The main thread's session answers synchronously: the profile is written before the process ends.
  process.once('exit', () => {
    session.post('HeapProfiler.stopSampling', (err, result) => {
      if (err === null) writeFileSync(file, JSON.stringify(result.profile))
    })
  })
}
