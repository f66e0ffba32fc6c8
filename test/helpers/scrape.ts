// Reads a Prometheus text exposition (a /metrics scrape) into samples, so tests can ask for one
// series by name and labels whatever order the labels were written in.
export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

export function parseScrape (text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = LINE.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1] ?? ''] = l[2] ?? ''
    samples.push({ name: m[1] ?? '', labels, value: Number(m[3]) })
  }
  return samples
}

/** The value of the one series with exactly these labels, or undefined when it is not exported. */
export function sampleValue (samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels)
  const found = samples.find((s) => s.name === name &&
    Object.keys(s.labels).length === wanted.length &&
    wanted.every(([k, v]) => s.labels[k] === v))
  return found?.value
}

/** Metric family names declared by `# TYPE` lines. */
export function metricNames (text: string): Set<string> {
  const names = new Set<string>()
  for (const line of text.split('\n')) {
    const m = /^# TYPE (\S+) /.exec(line)
    if (m?.[1] !== undefined) names.add(m[1])
  }
  return names
}

export async function scrape (adminUrl: string): Promise<{ text: string, samples: Sample[] }> {
  const res = await fetch(`${adminUrl}/metrics`)
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`)
  const text = await res.text()
  return { text, samples: parseScrape(text) }
}
