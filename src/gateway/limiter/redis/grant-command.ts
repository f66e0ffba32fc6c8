// How a grant call goes to Redis through ioredis: one EVALSHA whose arguments this module lays out flat, once.
// ioredis's own commands copy theirs with Array.prototype.flat and then stringify each one — about 140 ns an argument
// (15 µs for a call of 20 entries, 5 arguments each), paid per entry by every consumer without a pool on the long
// tail. Everything else is ioredis's, as its defineCommand does it: a connection's first call sends the script's
// source (EVAL), later ones its SHA, and a NOSCRIPT (a restarted or flushed Redis) is answered by sending the source
// again; the reply, integers only, is handed on as Redis sent it (no conversion to strings).
import { Command, type Cluster, type Redis } from 'ioredis'
import { GRANT } from './scripts.js'

/** The connections (sockets) on which the grant script was sent by source. */
interface Loaded { sockets: WeakSet<object> }

/** One grant call: EVALSHA sha numkeys key… arg…, its arguments given already flat and as strings. */
class GrantCommand extends Command {
  readonly #loaded: Loaded

  constructor (flat: string[], loaded: Loaded) {
    super('evalsha', [])
    this.args = flat
    this.#loaded = loaded
  }

  override toWritable (socket: object): string | Buffer {
    if (!this.#loaded.sockets.has(socket)) {
      this.#loaded.sockets.add(socket)
      this.name = 'eval'
      this.args[0] = GRANT.lua
    } else if (this.name === 'eval') {
      this.name = 'evalsha'
      this.args[0] = GRANT.sha
    }
    return super.toWritable(socket)
  }
}

/** Sends grant calls on `client`: `send(keys, args)` resolves to the script's reply. */
export function grantSender (client: Redis | Cluster): (keys: readonly string[], args: readonly string[]) => Promise<unknown> {
  const loaded: Loaded = { sockets: new WeakSet() }
  const dispatch = (command: GrantCommand): Promise<unknown> => {
    void client.sendCommand(command)
    return command.promise as Promise<unknown>
  }
  return (keys, args) => {
    const flat = new Array<string>(2 + keys.length + args.length)
    flat[0] = GRANT.sha
    flat[1] = String(keys.length)
    for (let index = 0; index < keys.length; index++) flat[2 + index] = keys[index]!
    for (let index = 0, at = 2 + keys.length; index < args.length; index++, at++) flat[at] = args[index]!
    return dispatch(new GrantCommand(flat, loaded)).catch((err: unknown) => {
      if (!(err instanceof Error) || !err.message.includes('NOSCRIPT')) throw err
      // Redis lost its scripts: every connection sends the source again, this call first (a socket not in the new
      // set: toWritable puts the source in its first argument).
      loaded.sockets = new WeakSet()
      return dispatch(new GrantCommand(flat, loaded))
    })
  }
}
