// One owner for everything a request holds in the gateway: its place in the drain count, its share
// of load shedding's concurrency limit, its connection's pipeline slot, its upstream call. Each is
// registered here when it is taken, and all are given back together, once, when the response is
// over — sent, failed, or its connection gone (reset before, during or after dispatch) — and the
// response's 'close' event always comes for a request the gateway processed (pipeline-gate.ts
// processes only requests that own their connection). No exit path releases anything itself, so no
// exit path can forget to (issue 39, row 1). A release that throws does not keep the others held.
import type { ServerResponse } from 'node:http'

const kHolds = Symbol('gateway.requestHolds')

type Release = () => void

interface HoldingResponse extends ServerResponse {
  [kHolds]?: Release[]
}

function over (res: ServerResponse): boolean {
  return res.destroyed || res.writableFinished
}

function releaseAll (res: HoldingResponse): void {
  const releases = res[kHolds] ?? []
  res[kHolds] = []
  let failure: unknown
  for (const release of releases) {
    try {
      release()
    } catch (err) {
      failure ??= err
    }
  }
  // Everything was given back; a release's bug still surfaces.
  if (failure !== undefined) throw failure
}

/**
 * `release` runs once, when `res` is over — at once if it already is. Releases run in the order
 * they were taken.
 */
export function holdUntilOver (res: ServerResponse, release: Release): void {
  if (over(res)) {
    release()
    return
  }
  const holding = res as HoldingResponse
  const holds = holding[kHolds]
  if (holds !== undefined) {
    holds.push(release)
    return
  }
  holding[kHolds] = [release]
  res.once('close', () => { releaseAll(holding) })
}
