// A listener that cannot bind its port is a configuration problem, not a crash: say which port and
// which variable sets it, in one line an operator can act on, instead of a stack trace.

/** "port 8080 is in use (GATEWAY_PORT)" for an EADDRINUSE error, else undefined. */
export function portInUseMessage (err: unknown, port: number, envName: string): string | undefined {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined
  return code === 'EADDRINUSE' ? `port ${port} is in use (${envName})` : undefined
}
