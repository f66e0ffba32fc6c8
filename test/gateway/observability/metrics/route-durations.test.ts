import t from 'tap'
import { createGatewayMetrics, DEFAULT_DURATION_BUCKETS } from '../../../../src/gateway/observability/metrics/registry.js'
import { parseScrape, sampleValue } from '../../../helpers/scrape.js'

const ROUTE = '/v1/pets'

async function samples (metrics: ReturnType<typeof createGatewayMetrics>): Promise<ReturnType<typeof parseScrape>> {
  return parseScrape(await metrics.registry.metrics())
}

t.test('durations counted in plain arrays reach the scrape as a Prometheus histogram: cumulative buckets, sum, count', async (t) => {
  const metrics = createGatewayMetrics({ plans: ['pro'], defaultMetrics: false })
  const observed = [0.0002, 0.0005, 0.0007, 0.003, 0.003, 0.2, 42]
  for (const s of observed) metrics.requestDuration.observe(ROUTE, s)
  const scraped = await samples(metrics)
  const bucket = (le: string): number | undefined => sampleValue(scraped, 'gateway_request_duration_seconds_bucket', { route: ROUTE, le })
  // A value equal to a bound counts in that bucket (le = "less than or equal").
  t.equal(bucket('0.0005'), 2)
  t.equal(bucket('0.001'), 3)
  t.equal(bucket('0.0025'), 3)
  t.equal(bucket('0.005'), 5)
  t.equal(bucket('0.25'), 6)
  t.equal(bucket(String(DEFAULT_DURATION_BUCKETS[DEFAULT_DURATION_BUCKETS.length - 1])), 6, 'the value above every bound is in no finite bucket')
  t.equal(bucket('+Inf'), 7)
  t.equal(sampleValue(scraped, 'gateway_request_duration_seconds_count', { route: ROUTE }), 7)
  t.ok(Math.abs((sampleValue(scraped, 'gateway_request_duration_seconds_sum', { route: ROUTE }) ?? NaN) - observed.reduce((a, b) => a + b, 0)) < 1e-9)
})

t.test('scraping again neither doubles nor loses counts, and later observations add up', async (t) => {
  const metrics = createGatewayMetrics({ plans: ['pro'], defaultMetrics: false })
  metrics.upstreamDuration.observe(ROUTE, 0.004)
  await samples(metrics)
  let scraped = await samples(metrics)
  t.equal(sampleValue(scraped, 'gateway_upstream_duration_seconds_count', { route: ROUTE }), 1)
  metrics.upstreamDuration.observe(ROUTE, 0.02)
  scraped = await samples(metrics)
  t.equal(sampleValue(scraped, 'gateway_upstream_duration_seconds_count', { route: ROUTE }), 2)
  t.equal(sampleValue(scraped, 'gateway_upstream_duration_seconds_bucket', { route: ROUTE, le: '0.005' }), 1)
  t.equal(sampleValue(scraped, 'gateway_upstream_duration_seconds_bucket', { route: ROUTE, le: '0.025' }), 2)
})

t.test('every known route is exposed at 0 before any request, a new route appears on its first observation', async (t) => {
  const metrics = createGatewayMetrics({ plans: ['pro'], defaultMetrics: false })
  let scraped = await samples(metrics)
  t.equal(sampleValue(scraped, 'gateway_request_duration_seconds_count', { route: '/v1/store/orders' }), 0)
  t.equal(sampleValue(scraped, 'gateway_request_duration_seconds_count', { route: 'unmatched' }), 0)
  t.equal(sampleValue(scraped, 'gateway_request_duration_seconds_count', { route: '/v1/new' }), undefined)
  metrics.requestDuration.observe('/v1/new', 0.001)
  scraped = await samples(metrics)
  t.equal(sampleValue(scraped, 'gateway_request_duration_seconds_count', { route: '/v1/new' }), 1)
})
