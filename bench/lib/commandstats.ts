// Redis's `INFO commandstats` read as numbers: calls and µs per command, the one parse every bench that
// counts a server's commands uses (processes.ts for the gateways' Redis, grant-cost and grant-replay for a
// scratch server's scripts).

export interface CommandStat { calls: number, usec: number }

/** `INFO commandstats` text as command → calls and µs (a script's µs include its inner calls). */
export function parseCommandStats (info: string): Map<string, CommandStat> {
  const stats = new Map<string, CommandStat>()
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    stats.set(match[1] ?? '', { calls: Number(match[2]), usec: Number(match[3]) })
  }
  return stats
}
