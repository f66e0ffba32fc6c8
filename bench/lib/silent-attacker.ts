// The slot squatter of bench/idle-squat.ts, in a process of its own so that its ten thousand
// sockets do not share an event loop with the victim being timed: `perAddress` connections from
// each address that never send a byte, each reopened when the gateway closes it, for `seconds`
// (then it closes everything and exits). Prints {"filled":N} once every address has opened its
// count, and {"open":N,"opened":N,"closedByServer":N} when it ends (or on SIGTERM).
//   node --import ./src/ts-resolve.ts bench/lib/silent-attacker.ts <host> <port> <perAddress> <seconds> <address>…
import { silentFlood } from '../../test/helpers/silent-connections.js'

const [host = '127.0.0.1', port = '0', perAddress = '1', seconds = '10', ...addresses] = process.argv.slice(2)
const FILL_TIMEOUT_MS = 60_000

const flood = silentFlood({ host, port: Number(port) }, addresses, Number(perAddress))
let ended = false
function end (): void {
  if (ended) return
  ended = true
  process.stdout.write(`${JSON.stringify({ open: flood.open, opened: flood.opened, closedByServer: flood.closedByServer })}\n`)
  flood.stop()
  setTimeout(() => process.exit(0), 200).unref()
}
process.once('SIGTERM', end)
setTimeout(end, Number(seconds) * 1000)
process.stdout.write(`${JSON.stringify({ filled: await flood.filled(FILL_TIMEOUT_MS) })}\n`)
