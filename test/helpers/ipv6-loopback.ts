// Real IPv6 source addresses on one machine: 2001:db8::/48 (the documentation prefix) routed to lo,
// and binding to any address in it allowed, so a test can connect from 2001:db8:0:1::a and
// 2001:db8:0:2::a to a listener on 2001:db8::1. Needs root; idempotent.
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { promisify } from 'node:util'

/** Routes 2001:db8::/48 to lo and allows non-local binds; false when the machine does not let us. */
export async function setUpIpv6Loopback (): Promise<boolean> {
  try {
    await promisify(execFile)('ip', ['-6', 'route', 'replace', 'local', '2001:db8::/48', 'dev', 'lo'])
    writeFileSync('/proc/sys/net/ipv6/ip_nonlocal_bind', '1')
    return true
  } catch {
    return false
  }
}
