// The monthly quota, its overage rule and a route's cost in the config: every new field validated
// with its exact message (perMonth ≥ perDay on a plan, on an Enterprise key's own limits and on a
// shadow once it applies; overage: allow only with a perMonth; a shadow perMonth below the enforced
// one; the bounds of perMonth and cost), and what a valid config reads into the snapshot (an
// Enterprise key's own quota takes its custom plan's overage rule; a route's cost defaults to 1).
import t from 'tap'
import { MAX_COST, MAX_PER_MONTH } from '../../../src/gateway/config/schema.js'
import { configProblems, testConfig } from '../../helpers/config-fixture.js'

const D1 = 'a'.repeat(64)

/** plans.yaml with `free` as given (pro and business tiny, enterprise custom unless given). */
function plans (free: string, enterprise = '{ custom: true }'): string {
  return `plans:\n  free: ${free}\n  pro: { perMinute: 1, perDay: 1 }\n  business: { perMinute: 1, perDay: 1 }\n  enterprise: ${enterprise}\nanonymous: { perMinute: 30, perDay: 300 }\n`
}

/** keys.yaml with one Enterprise key of these limits. */
function enterpriseKey (limits: string): string {
  return `keys:\n  - { id: big, sha256: ${D1}, plan: enterprise, limits: ${limits} }\n`
}

function route (cost: string): string {
  return `routes:\n  - { method: POST, path: /v1/pets, cost: ${cost} }\n`
}

t.test('each new field is checked, and a problem names file, path and reason', async (t) => {
  const cases: Array<[string, Parameters<typeof configProblems>[0], string]> = [
    ['a plan\'s perMonth below its perDay', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000, perMonth: 999 }') },
      'plans.yaml: plans.free: perMonth (999) must be at least perDay (1000): a month holds every day\'s requests'],
    ['perMonth 0', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000, perMonth: 0 }') }, 'plans.yaml: plans.free.perMonth: must be >= 1'],
    ['perMonth over its bound', { 'plans.yaml': plans(`{ perMinute: 60, perDay: 1000, perMonth: ${MAX_PER_MONTH + 1} }`) }, 'plans.yaml: plans.free.perMonth: must be <= 10000000000000'],
    ['overage: allow without a perMonth', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000, overage: allow }') },
      'plans.yaml: plans.free.overage: allow needs a perMonth: overage is what is admitted past the month\'s quota'],
    ['overage neither allow nor block', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000, perMonth: 5000, overage: maybe }') },
      'plans.yaml: plans.free.overage: must be one of "allow", "block"'],
    ['a custom plan with a perMonth of its own', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000 }', '{ custom: true, perMonth: 5000 }') },
      'plans.yaml: plans.enterprise: needs perMinute and perDay (perMonth optional), or custom: true (not both)'],
    ['shadow.perMonth equal to the enforced perMonth', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000, perMonth: 5000, shadow: { perMonth: 5000 } }') },
      'plans.yaml: plans.free.shadow.perMonth: 5000 equals the enforced perMonth: a shadow limit rehearses a different one (remove it, or give the new value)'],
    ['shadow.perMonth above the enforced perMonth', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000, perMonth: 5000, shadow: { perMonth: 6000 } }') },
      'plans.yaml: plans.free.shadow.perMonth: 6000 is above the enforced perMonth (5000): the enforced limit rejects first, so this one would never count a request'],
    ['shadow.perMonth below the day once the shadow applies', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000, shadow: { perMonth: 999 } }') },
      'plans.yaml: plans.free.shadow: perMonth (999) must be at least perDay (1000) once the shadow applies: a month holds every day\'s requests'],
    ['shadow.perMonth 0', { 'plans.yaml': plans('{ perMinute: 60, perDay: 1000, shadow: { perMonth: 0 } }') }, 'plans.yaml: plans.free.shadow.perMonth: must be >= 1'],
    ['an Enterprise key\'s perMonth below its perDay', { 'keys.yaml': enterpriseKey('{ perMinute: 10, perDay: 100, perMonth: 99 }') },
      'keys.yaml: keys[0].limits: perMonth (99) must be at least perDay (100): a month holds every day\'s requests'],
    ['an Enterprise key\'s shadow.perMonth equal to its own perMonth', { 'keys.yaml': enterpriseKey('{ perMinute: 10, perDay: 100, perMonth: 1000, shadow: { perMonth: 1000 } }') },
      'keys.yaml: keys[0].limits.shadow.perMonth: 1000 equals the enforced perMonth: a shadow limit rehearses a different one (remove it, or give the new value)'],
    ['an overage rule on a key (it belongs to the plan)', { 'keys.yaml': enterpriseKey('{ perMinute: 10, perDay: 100, perMonth: 1000, overage: allow }') },
      'keys.yaml: keys[0].limits: unknown field "overage"'],
    ['cost 0', { 'routes.yaml': route('0') }, 'routes.yaml: routes[0].cost: must be >= 1'],
    ['cost over its bound', { 'routes.yaml': route(String(MAX_COST + 1)) }, 'routes.yaml: routes[0].cost: must be <= 1000000'],
    ['a fractional cost', { 'routes.yaml': route('2.5') }, 'routes.yaml: routes[0].cost: must be integer'],
    ['a cost that is no number', { 'routes.yaml': route('five') }, 'routes.yaml: routes[0].cost: must be integer']
  ]
  for (const [name, overrides, message] of cases) t.same(configProblems(overrides), [message], name)
})

t.test('what a valid config reads: the quota and its rule on a plan, on a key, rehearsed by a shadow; costs with their default', async (t) => {
  const snapshot = testConfig({
    'plans.yaml': plans('{ perMinute: 60, perDay: 1000, perMonth: 20000, shadow: { perMonth: 15000 } }', '{ custom: true, overage: allow }')
      .replace('pro: { perMinute: 1, perDay: 1 }', 'pro: { perMinute: 300, perDay: 10000, perMonth: 200000, overage: allow }')
      .replace('business: { perMinute: 1, perDay: 1 }', 'business: { perMinute: 1000, perDay: 100000, shadow: { perMonth: 2000000 } }'),
    'keys.yaml': enterpriseKey('{ perMinute: 10, perDay: 100, perMonth: 1000 }') + `  - { id: small, sha256: ${'b'.repeat(64)}, plan: enterprise, limits: { perMinute: 10, perDay: 100 } }\n`,
    'routes.yaml': `${route('5')}  - { method: GET, path: /v1/pets }\n  - { method: GET, path: /v1/pets/:petId, cost: ${MAX_COST} }\n`
  })
  t.same(snapshot.plans.get('free'), { perMinute: 60, perDay: 1000, perMonth: 20000, overage: false, shadow: { perMinute: undefined, perDay: undefined, perMonth: 15000, announce: false } },
    'a quota blocks by default (overage: block)')
  t.same(snapshot.plans.get('pro'), { perMinute: 300, perDay: 10000, perMonth: 200000, overage: true })
  t.same(snapshot.plans.get('business'), { perMinute: 1000, perDay: 100000, shadow: { perMinute: undefined, perDay: undefined, perMonth: 2000000, announce: false } },
    'a quota rehearsed before there is one: no perMonth enforced')
  t.same(snapshot.keysById.get('big')?.limits, { perMinute: 10, perDay: 100, perMonth: 1000, overage: true }, 'a key\'s own quota takes its custom plan\'s overage rule')
  t.same(snapshot.keysById.get('small')?.limits, { perMinute: 10, perDay: 100 }, 'no perMonth: no quota, whatever the plan\'s rule')
  t.same(snapshot.routes.map((r) => `${r.method} ${r.path} ${r.cost}`), ['POST /v1/pets 5', 'GET /v1/pets 1', `GET /v1/pets/:petId ${MAX_COST}`])
})
