// Where a process allocates, garbage included: Node's --heap-prof keeps only what is still live when it
// writes, so the short-lived objects a request leaves behind (what the garbage collector's share is made
// of) never show there. Preloaded into a measured process (`node --import <this file>`) with
// HEAP_SAMPLING_FILE set, it starts V8's sampling heap profiler with the objects collected by minor and
// major GCs kept, and writes the profile when the process exits; `summarizeAllocations` reads it
// (bench/profile.ts: PROFILE_HEAP=1). HEAP_SAMPLING_INTERVAL: bytes between samples (default 32 KiB).
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'

interface AllocationNode { callFrame: { functionName: string, url: string, lineNumber: number }, selfSize: number, children: AllocationNode[] }
export interface AllocationProfile { head: AllocationNode }

/** Bytes allocated per frame (self), largest first, with each one's share: markdown lines. */
export function summarizeAllocations (profile: AllocationProfile, requests: number, top = 25): string[] {
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
  const lines = [`Sampled allocations, garbage included: ${(total / 1e6).toFixed(1)} MB in all, ${(total / Math.max(1, requests)).toFixed(0)} bytes per request (the whole process's life over every request it answered: start-up is in it).`, '',
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
  session.post('HeapProfiler.startSampling', {
    samplingInterval: Number(process.env.HEAP_SAMPLING_INTERVAL ?? 32_768),
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true
  })
  // The main thread's session answers synchronously: the profile is written before the process ends.
  process.once('exit', () => {
    session.post('HeapProfiler.stopSampling', (err, result) => {
      if (err === null) writeFileSync(file, JSON.stringify(result.profile))
    })
  })
}
