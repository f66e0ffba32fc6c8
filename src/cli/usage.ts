// What the command line says about itself: one help text per command (`petstore-gateway keys create
// --help`), the commands of a group (`petstore-gateway keys --help`) and the whole list
// (`petstore-gateway --help`, and on stderr when it is run with nothing to do). Kept apart from the
// commands so main.ts reads as what they do, and so every command is described in one place.
import { DEFAULT_ADMIN_URL } from './admin-client.js'

export const PROGRAM = 'petstore-gateway'

export interface CommandHelp {
  /** `keys create` */
  readonly name: string
  /** What follows the name on the usage line. */
  readonly args: string
  /** One line for the list of commands. */
  readonly summary: string
  /** The rest of `<command> --help`: options and what they mean. */
  readonly details: readonly string[]
}

const ADMIN_OPTION = `  --admin URL      the gateway's admin port (default ${DEFAULT_ADMIN_URL}); ADMIN_TOKEN is sent as bearer`
const CONFIG_OPTION = '  --config DIR     the config directory (default CONFIG_DIR, else ./config)'

export const COMMANDS: readonly CommandHelp[] = [
  {
    name: 'keys create',
    args: '--id ID --plan PLAN [--per-minute N --per-day N] [--config DIR]',
    summary: 'a new key: prints it once, and the keys.yaml entry to add',
    details: [
      '  --id ID          the key\'s id: letters, digits, . _ - (at most 64)',
      '  --plan PLAN      a plan of plans.yaml',
      '  --per-minute N, --per-day N',
      '                   the limits of a custom plan (enterprise); given together',
      CONFIG_OPTION
    ]
  },
  {
    name: 'keys rotate',
    args: '--id ID [--grace 7d] [--config DIR]',
    summary: 'a new key for ID\'s consumer; ID keeps working for the grace',
    details: [
      '  --id ID          the key to replace',
      '  --grace TIME     how long ID keeps working: 30s, 15m, 12h, 7d (default 7d)',
      CONFIG_OPTION,
      'Edits keys.yaml in place (written atomically); a watching gateway picks it up.'
    ]
  },
  {
    name: 'keys hash',
    args: '[KEY]',
    summary: 'the SHA-256 digest of KEY (or of the first line of stdin)',
    details: []
  },
  {
    name: 'keys show',
    args: 'ID [--json] [--admin URL]',
    summary: 'a consumer (or key) on the running gateway: credentials, usage (the month against its quota), ban, the last 7 days',
    details: ['  --json           the admin API\'s answer as it is', ADMIN_OPTION]
  },
  {
    name: 'keys usage',
    args: 'ID [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--csv | --json] [--admin URL]',
    summary: 'a consumer\'s requests admitted and rejected, units and overage per UTC day (the last 35 days are kept)',
    details: [
      '  --from, --to     UTC days, at most 35 of them (default: the last 35 days up to today)',
      '  --csv            date,consumer,plan,admitted,rejected,total,units,overage: one line per day, for billing',
      '                   (units: what the admitted requests spent, a route\'s cost each; overage: units past',
      '                   the month\'s quota on a plan with overage: allow)',
      '  --json           the admin API\'s answer as it is',
      ADMIN_OPTION
    ]
  },
  {
    name: 'keys reset',
    args: 'ID [--admin URL]',
    summary: 'clear a consumer\'s windows, ban and escalation on the running gateway',
    details: [ADMIN_OPTION]
  },
  {
    name: 'plans shadow',
    args: 'PLAN [--top N] [--json] [--admin URL]',
    summary: 'who PLAN\'s shadow limits would have rejected in the last 24 h, top N by count',
    details: ['  --top N          consumers listed (default 20)', '  --json           the admin API\'s answer as it is', ADMIN_OPTION]
  },
  {
    name: 'plans diff',
    args: 'DIR [--admin URL]',
    summary: 'which limits the config in DIR would change on the running gateway, for how many consumers',
    details: [
      ADMIN_OPTION,
      'DIR is loaded as the gateway would load it (its problems are printed, exit 1); per plan: the limits',
      'in force → the new ones (shadow included) and the consumers DIR configures on it; per consumer of a',
      'custom plan: its own limits in force → its new ones.'
    ]
  },
  {
    name: 'config check',
    args: '[DIR]',
    summary: 'validate a config directory (default CONFIG_DIR, else ./config)',
    details: ['Prints every problem, one a line, and exits 1 when there is any.']
  },
  {
    name: 'bans list',
    args: '[--admin URL]',
    summary: 'bans in force',
    details: [ADMIN_OPTION, 'With REDIS_URL (or REDIS_CLUSTER_NODES / REDIS_SENTINELS) set and no --admin, reads Redis directly.']
  },
  {
    name: 'bans lift',
    args: 'ID [--admin URL]',
    summary: 'end a consumer\'s (or key\'s) ban',
    details: [ADMIN_OPTION, 'With REDIS_URL (or REDIS_CLUSTER_NODES / REDIS_SENTINELS) set and no --admin, writes Redis directly.', 'No ban in force is not an error: it says so and exits 0.']
  },
  {
    name: 'store expire-leaked',
    args: '[--dry-run]',
    summary: 'give the day hashes an older gateway left without an expiry their expiry',
    details: [
      'Reads REDIS_URL (or REDIS_CLUSTER_NODES / REDIS_SENTINELS): the Redis the gateways share.',
      'Scans in small paced pages (every master of a Cluster) and only adds an expiry where there is none;',
      'safe beside running gateways. Run once after upgrading from a gateway of before 29 Nov 2026.',
      '  --dry-run        count what would change, change nothing'
    ]
  },
  {
    name: 'webhooks test',
    args: '[ENDPOINT] [--config DIR]',
    summary: 'send a signed test event to every webhook endpoint (or the one named)',
    details: [CONFIG_OPTION, 'Reads webhooks.yaml and its secrets (environment, secret files) as the gateway does, and sends from here.', 'Exits 1 when an endpoint does not answer 2xx.']
  },
  {
    name: 'webhooks dead-letters',
    args: '[--admin URL] [--json]',
    summary: 'webhook deliveries that failed their last attempt',
    details: [ADMIN_OPTION]
  },
  {
    name: 'webhooks replay',
    args: 'ID|all [--admin URL]',
    summary: 'queue a dead letter (by webhook-id), or all of them, again',
    details: [ADMIN_OPTION, 'A replayed event keeps its webhook-id and starts a fresh retry schedule.']
  }
]

const NAME_WIDTH = Math.max(...COMMANDS.map((c) => c.name.length)) + 2

/** Every command, one a line: `petstore-gateway --help`. */
export function usage (): string {
  return [
    `usage: ${PROGRAM} <command> [options]      (${PROGRAM} <command> --help for one command)`,
    ...COMMANDS.map((c) => `  ${c.name.padEnd(NAME_WIDTH)}${c.summary}`)
  ].join('\n')
}

/** The commands of one group (`keys`, `config`, `bans`), or undefined for an unknown group. */
export function groupUsage (group: string): string | undefined {
  const commands = COMMANDS.filter((c) => c.name.startsWith(`${group} `))
  if (commands.length === 0) return undefined
  return [
    `usage: ${PROGRAM} ${group} <command> [options]`,
    ...commands.map((c) => `  ${c.name.padEnd(NAME_WIDTH)}${c.summary}`)
  ].join('\n')
}

/** `<command> --help`. */
export function commandUsage (command: CommandHelp): string {
  return [`usage: ${PROGRAM} ${command.name} ${command.args}`, command.summary, ...command.details].join('\n')
}
