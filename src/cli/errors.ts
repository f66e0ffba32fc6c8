// The two ways a command fails, both one line on stderr and exit 1: a UsageError (the command line
// itself is wrong: the line ends with where its --help is) and a CommandError (the request was
// understood but cannot be done — unknown id, bad duration, gateway unreachable).
export class UsageError extends Error {}

export class CommandError extends Error {}
