import t from 'tap'
import { findLifecycleEntry, lifecycleIndex, mergeLink, successorLink, sunsetValue, deprecationValue } from '../../../src/gateway/lifecycle/rules.js'
import { testConfig } from '../../helpers/config-fixture.js'

t.test('header values follow RFC 9745 (Deprecation), RFC 8594 (Sunset) and RFC 8288 (Link)', async (t) => {
  t.equal(deprecationValue(Date.UTC(2026, 10, 21)), '@1795219200')
  t.equal(deprecationValue(Date.UTC(2026, 10, 21) + 999), '@1795219200', 'whole seconds, rounded down')
  t.equal(sunsetValue(Date.UTC(2030, 11, 5)), 'Thu, 05 Dec 2030 00:00:00 GMT')
  t.equal(successorLink('/v1/pets'), '</v1/pets>; rel="successor-version"')
  t.equal(successorLink('/v1/pets?status=a b<c>'), '</v1/pets?status=a%20b%3Cc%3E>; rel="successor-version"', 'a successor cannot break out of <>')
})

t.test('mergeLink keeps every existing Link value and appends ours', async (t) => {
  const ours = '</v1/pets>; rel="successor-version"'
  t.equal(mergeLink(undefined, ours), ours)
  t.equal(mergeLink('', ours), ours)
  t.equal(mergeLink('</v1/pets?cursor=x>; rel="next"', ours), `</v1/pets?cursor=x>; rel="next", ${ours}`)
  t.equal(mergeLink(['<a>; rel="next"', '<b>; rel="prev"'], ours), `<a>; rel="next", <b>; rel="prev", ${ours}`)
})

t.test('the index is built once per snapshot and finds rules by route pattern and method (HEAD follows GET)', async (t) => {
  const snapshot = testConfig()
  const index = lifecycleIndex(snapshot)
  t.equal(lifecycleIndex(snapshot), index, 'same snapshot, same index object')
  t.not(lifecycleIndex(testConfig()), index, 'a new snapshot gets its own index')

  const getPet = findLifecycleEntry(index, '/v1/pets/:petId', 'GET')
  t.same(getPet?.headers, { deprecation: '@1795219200', sunset: 'Thu, 05 Dec 2030 00:00:00 GMT' })
  t.equal(getPet?.link, '</v1/pets>; rel="successor-version"')
  t.equal(getPet?.sunset, Date.UTC(2030, 11, 5))
  t.equal(getPet?.deprecated, true)
  t.equal(findLifecycleEntry(index, '/v1/pets/:petId', 'HEAD'), getPet)
  t.equal(findLifecycleEntry(index, '/v1/pets/:petId', 'DELETE'), undefined)
  t.equal(findLifecycleEntry(index, '/v1/pets', 'GET'), undefined)

  const orders = findLifecycleEntry(index, '/v1/store/orders', 'GET')
  t.same(orders?.headers, { 'x-api-stability': 'experimental' })
  t.equal(orders?.deprecated, false)
  t.equal(orders?.sunset, undefined)
  t.equal(orders?.link, undefined)
})
