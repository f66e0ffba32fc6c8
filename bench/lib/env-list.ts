// The bench's one-line settings for extra gateway environment (BENCH_GATEWAY_ENV) and extra
// gateway configurations (BENCH_VARIANTS), so a limiter setting can be run on and off side by side.

/** "K=V,K=V" → { K: V }. */
export function parseEnvList (raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const pair of (raw ?? '').split(',')) {
    const eq = pair.indexOf('=')
    if (eq > 0) out[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim()
  }
  return out
}

/** "name:K=V,K=V;name2:K=V" → [{ name, env }]. */
export function parseVariants (raw: string | undefined): Array<{ name: string, env: Record<string, string> }> {
  return (raw ?? '').split(';').map((s) => s.trim()).filter((s) => s !== '').map((s) => {
    const colon = s.indexOf(':')
    return colon < 0 ? { name: s, env: {} } : { name: s.slice(0, colon).trim(), env: parseEnvList(s.slice(colon + 1)) }
  })
}
