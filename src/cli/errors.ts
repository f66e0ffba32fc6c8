// The two ways a command fails: a UsageError (the command line itself is wrong: exit 2 with the
// usage text) and a CommandError (the request was understood but cannot be done — unknown id, bad
// duration, gateway unreachable: exit 1 with one clear line).
export class UsageError extends Error {}

export class CommandError extends Error {}
