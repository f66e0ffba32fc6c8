// The admin app answers only Host names it knows (src/gateway/admin/request-guard.ts): whatever
// Prometheus scrapes by — the pod IP on Kubernetes, the service names in compose — must be one.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Fastify from 'fastify'
import { parseAllDocuments } from 'yaml'
import { buildAdmin } from '../../src/gateway/admin/app.js'
import { ReadinessRegistry } from '../../src/gateway/runtime/readiness.js'
import { settingsFromEnv } from '../../src/gateway/runtime/settings.js'
import { COMPOSE_VARIANTS, composeFile, containerOf, DEPLOY, envOf, K8S_DIR, kustomize, type Json } from '../helpers/deploy.js'

t.test('Prometheus\'s scrape targets are admin hosts: the pod IP on Kubernetes, the service names in compose', async (t) => {
  const deployment = kustomize(join(K8S_DIR, 'base')).find((doc) => doc.kind === 'Deployment' && doc.metadata?.name === 'petstore-gateway')
  t.same(envOf(containerOf(deployment)).get('ADMIN_HOSTS')?.valueFrom, { fieldRef: { fieldPath: 'status.podIP' } }, 'Kubernetes: ADMIN_HOSTS is the pod IP')
  const services = composeFile(COMPOSE_VARIANTS.default!.vars).services as Record<string, Json>
  const targets = (parseAllDocuments(readFileSync(join(DEPLOY, 'prometheus', 'prometheus.yml'), 'utf8'))[0] as { toJS: () => Json }).toJS()
    .scrape_configs.flatMap((c: Json) => c.static_configs.flatMap((s: Json) => s.targets as string[])) as string[]
  for (const name of ['gateway-1', 'gateway-2']) {
    const hosts = settingsFromEnv(services[name]?.environment as Record<string, string>).adminHosts
    for (const target of targets) t.ok(hosts.includes(target.split(':')[0] ?? ''), `compose ${name}: ADMIN_HOSTS has ${target}'s host`)
  }
  const gateway = Fastify()
  const admin = await buildAdmin({ gateway, readiness: new ReadinessRegistry(), hosts: ['10.42.0.7'] })
  t.teardown(async () => { await admin.close(); await gateway.close() })
  t.equal((await admin.inject({ method: 'GET', url: '/admin/none', headers: { host: '10.42.0.7:9091' } })).statusCode, 404, 'a request naming the pod IP is routed')
  t.equal((await admin.inject({ method: 'GET', url: '/admin/none', headers: { host: '10.42.0.8:9091' } })).statusCode, 403, 'one naming another pod\'s IP is refused')
})
