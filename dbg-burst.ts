import { createLuaVm } from './test/helpers/sim/redis-model.js'
import { runSchedule } from './test/helpers/sim/run.js'
const vm = await createLuaVm()
const short: string[] = []
let min = 1
for (let seed = 1; seed <= 300; seed++) {
  const r = await runSchedule('burst', seed, vm)
  const lim = r.schedule.consumers[0]!.perMinute
  const f = r.admitted / lim
  min = Math.min(min, f)
  if (r.admitted < lim) short.push(`${seed}:${r.admitted}/${lim} ${JSON.stringify(r.outcomes)}`)
}
console.log('min', min.toFixed(3), 'short', short.length, short.slice(0, 10).join(' | '))
