// The Kubernetes base and each overlay (staging, production), rendered by the real `kubectl
// kustomize`, pass the Kubernetes 1.27 and Prometheus Operator JSON schemas bundled in
// `kubernetes-models` (offline), with unknown fields refused, and carry the probes, resources,
// security context, drain budget and policies we rely on. The gateway config in the ConfigMap is
// loaded by the gateway's own loader, as production would (no demo keys).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, posix, relative } from 'node:path'
import { pathToFileURL } from 'node:url'
import Fastify from 'fastify'
import t from 'tap'
import { validate as validateNamespace } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Namespace'
import { validate as validateConfigMap } from 'kubernetes-models/_schemas/IoK8sApiCoreV1ConfigMap'
import { validate as validateSecret } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Secret'
import { validate as validateService } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Service'
import { validate as validatePvc } from 'kubernetes-models/_schemas/IoK8sApiCoreV1PersistentVolumeClaim'
import { validate as validateDeployment } from 'kubernetes-models/_schemas/IoK8sApiAppsV1Deployment'
import { validate as validateStatefulSet } from 'kubernetes-models/_schemas/IoK8sApiAppsV1StatefulSet'
import { validate as validateHpa } from 'kubernetes-models/_schemas/IoK8sApiAutoscalingV2HorizontalPodAutoscaler'
import { validate as validatePdb } from 'kubernetes-models/_schemas/IoK8sApiPolicyV1PodDisruptionBudget'
import { validate as validateNetworkPolicy } from 'kubernetes-models/_schemas/IoK8sApiNetworkingV1NetworkPolicy'
import { validate as validateIngress } from 'kubernetes-models/_schemas/IoK8sApiNetworkingV1Ingress'
import { buildAdmin } from '../../src/gateway/admin/app.js'
import { CONFIG_FILES, type ConfigTexts } from '../../src/gateway/config/loader.js'
import { ReadinessRegistry } from '../../src/gateway/runtime/readiness.js'
import { livenessPlugin } from '../../src/gateway/runtime/liveness.js'
import { DEFAULT_ADMIN_PORT, DEFAULT_GATEWAY_PORT, DEFAULT_SHUTDOWN_GRACE_MS } from '../../src/gateway/runtime/settings.js'
import { BACKEND_ENV, BACKEND_PORT, checkGatewayConfig, composeFile, containerOf, envOf, envValue, GATEWAY_ENV, K8S_DIR, kustomize, loadYaml, parseDockerfile, REDIS_PERSISTENCE, redisServerOptions, ROOT, walk, type Json } from '../helpers/deploy.js'

type Validate = (data: unknown) => boolean
// The operator package exports its models but not their compiled schemas; load the schema file itself.
const operatorDir = dirname(createRequire(import.meta.url).resolve('@kubernetes-models/prometheus-operator/package.json'))
const { validate: validateServiceMonitor } = await import(pathToFileURL(join(operatorDir,
  '_schemas/ComGithubPrometheusOperatorPrometheusOperatorPkgApisMonitoringV1ServiceMonitor.js')).href) as { validate: Validate }
interface SchemaError { instancePath: string, keyword: string, params: unknown }
const SCHEMAS: Record<string, Validate> = {
  'v1/Namespace': validateNamespace,
  'v1/ConfigMap': validateConfigMap,
  'v1/Secret': validateSecret,
  'v1/Service': validateService,
  'v1/PersistentVolumeClaim': validatePvc,
  'apps/v1/Deployment': validateDeployment,
  'apps/v1/StatefulSet': validateStatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': validateHpa,
  'policy/v1/PodDisruptionBudget': validatePdb,
  'networking.k8s.io/v1/NetworkPolicy': validateNetworkPolicy,
  'networking.k8s.io/v1/Ingress': validateIngress,
  'monitoring.coreos.com/v1/ServiceMonitor': validateServiceMonitor
}

/**
 * Schema validation plus kubeconform's `-strict`: the bundled validators accept unknown fields
 * (a misspelt `readinesProbe` would pass), so the document is wrapped in proxies that record which
 * fields the compiled schema looked at; any field it never read is not in the schema.
 */
function validateStrict (doc: Json): string[] {
  const validate = SCHEMAS[`${doc.apiVersion}/${doc.kind}`]
  if (validate === undefined) return [`no schema for ${doc.apiVersion} ${doc.kind}`]
  const read = new WeakMap<object, Set<PropertyKey>>()
  const proxies = new WeakMap<object, object>()
  const wrap = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null) return value
    let proxy = proxies.get(value)
    if (proxy === undefined) {
      const seen = new Set<PropertyKey>()
      read.set(value, seen)
      proxy = new Proxy(value, {
        get (target, key, receiver) {
          seen.add(key)
          return wrap(Reflect.get(target, key, receiver))
        }
      })
      proxies.set(value, proxy)
    }
    return proxy
  }
  const problems: string[] = []
  if (!validate(wrap(doc))) {
    const errors = (validate as unknown as { errors?: SchemaError[] }).errors ?? []
    problems.push(...errors.map((e) => `${e.instancePath || '/'}: ${e.keyword} ${JSON.stringify(e.params)}`))
    return problems
  }
  const visit = (value: unknown, path: string): void => {
    if (typeof value !== 'object' || value === null) return
    const seen = read.get(value)
    for (const [key, child] of Object.entries(value)) {
      if (!Array.isArray(value) && seen?.has(key) !== true) problems.push(`${path}/${key}: unknown field`)
      else visit(child, `${path}/${key}`)
    }
  }
  visit(doc, '')
  return problems
}

interface K8sDoc { file: string, doc: Json }
/** What each kustomization under deploy/k8s renders to (`kubectl kustomize`), plus the example Secret in its namespace. */
const RENDERINGS = ['base', 'overlays/staging', 'overlays/production'] as const
type Rendering = typeof RENDERINGS[number]
const SECRET_EXAMPLE = join(K8S_DIR, 'secret.example.yaml')
function rendered (which: Rendering): K8sDoc[] {
  const docs = kustomize(join(K8S_DIR, which)).map((doc) => ({ file: `${which} → ${doc.kind as string}`, doc }))
  const namespace = docs.find((d) => d.doc.kind === 'Namespace')?.doc.metadata.name as string | undefined
  const secrets = loadYaml(SECRET_EXAMPLE).map((doc) => ({ file: 'secret.example.yaml', doc: namespace === undefined ? doc : { ...doc, metadata: { ...doc.metadata, namespace } } }))
  return [...docs, ...secrets]
}
function portNumber (container: Json, port: string | number): number | undefined {
  return typeof port === 'number' ? port : (container.ports as Json[]).find((p) => p.name === port)?.containerPort as number | undefined
}
const matches = (selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean =>
  selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v)

t.test('the strict schema check refuses what it must', async (t) => {
  const good = { apiVersion: 'v1', kind: 'Service', metadata: { name: 's', labels: { a: 'b' } }, spec: { selector: { a: 'b' }, ports: [{ port: 80, targetPort: 'http' }] } }
  t.same(validateStrict(good), [], 'a valid Service (maps and int-or-string included)')
  t.same(validateStrict({ ...good, spec: { ...good.spec, portz: [] } }), ['/spec/portz: unknown field'], 'a misspelt field')
  t.match(validateStrict({ ...good, spec: { ports: [{ port: 'eighty' }] } }).join(), /\/spec\/ports\/0\/port: type/, 'a wrong type')
  t.same(validateStrict({ apiVersion: 'v9', kind: 'Thing' }), ['no schema for v9 Thing'], 'an unknown kind')
})

t.test('k8s base: kustomization lists every manifest of base/; the example Secret is in none', async (t) => {
  const [kustomization] = loadYaml(join(K8S_DIR, 'base', 'kustomization.yaml')) as [Json]
  const listed = (kustomization.resources as string[]).slice().sort()
  const manifests = walk(join(K8S_DIR, 'base')).map((f) => relative(join(K8S_DIR, 'base'), f)).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml').sort()
  t.same(listed, manifests, 'resources')
  t.equal(kustomization.namespace, undefined, 'the base sets no namespace: each overlay does')
  for (const which of RENDERINGS) t.notOk(rendered(which).some((d) => d.file !== 'secret.example.yaml' && d.doc.kind === 'Secret'), `${which}: applies no Secret (no placeholder token)`)
})

const OVERLAYS = {
  'overlays/staging': { namespace: 'petstore-staging', urlVariable: 'STAGING_BASE_URL' },
  'overlays/production': { namespace: 'petstore', urlVariable: 'PUBLIC_BASE_URL' }
} as const

t.test('k8s overlays: own namespace, public host from the environment\'s base URL, both servers documented, sizing', async (t) => {
  const sizes: Record<string, { min: number, cpu: string }> = {}
  for (const [which, expected] of Object.entries(OVERLAYS) as Array<[Rendering, typeof OVERLAYS[keyof typeof OVERLAYS]]>) {
    const docs = rendered(which)
    const find = (kind: string, name: string): Json | undefined => docs.find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc
    t.ok(find('Namespace', expected.namespace), `${which}: creates namespace ${expected.namespace}`)
    for (const { doc } of docs) {
      if (doc.kind !== 'Namespace') t.equal(doc.metadata.namespace, expected.namespace, `${which}: ${doc.kind} ${doc.metadata.name} is in ${expected.namespace}`)
    }
    const c = containerOf(find('Deployment', 'petstore-gateway'))
    const publicUrl = envValue(c, expected.urlVariable)
    t.ok(publicUrl !== undefined && /^https:\/\//.test(publicUrl), `${which}: ${expected.urlVariable} is an https URL (${publicUrl})`)
    for (const name of ['PUBLIC_BASE_URL', 'STAGING_BASE_URL']) t.ok(envValue(c, name), `${which}: ${name} set, so the OpenAPI document lists both servers`)
    const ingress = find('Ingress', 'petstore-gateway') as Json
    const host = new URL(publicUrl ?? 'http://invalid').hostname
    t.same((ingress.spec.rules as Json[]).map((r) => r.host), [host], `${which}: the Ingress serves ${host}`)
    t.same(ingress.spec.tls[0].hosts, [host], `${which}: with TLS for it`)
    const backend = ingress.spec.rules[0].http.paths[0].backend.service as Json
    const service = find('Service', backend.name) as Json
    t.ok(service && (service.spec.ports as Json[]).some((p) => p.name === backend.port.name), `${which}: the Ingress routes to the public Service's ${backend.port.name} port`)
    t.not(backend.name, 'petstore-gateway-admin', `${which}: never to the admin port`)
    const hpa = find('HorizontalPodAutoscaler', 'petstore-gateway') as Json
    sizes[which] = { min: hpa.spec.minReplicas as number, cpu: c.resources.requests.cpu as string }
    t.equal(find('Deployment', 'petstore-backend')?.spec.replicas, 1, `${which}: still one backend`)
  }
  t.ok((sizes['overlays/production']?.min ?? 0) > (sizes['overlays/staging']?.min ?? 0), 'production runs more gateways than staging')
  t.not(sizes['overlays/production']?.cpu, sizes['overlays/staging']?.cpu, 'and sizes them differently')
  const stagingConfig = rendered('overlays/staging').find((d) => d.doc.kind === 'ConfigMap')?.doc as Json
  const productionConfig = rendered('overlays/production').find((d) => d.doc.kind === 'ConfigMap')?.doc as Json
  t.not(stagingConfig.data['keys.yaml'], productionConfig.data['keys.yaml'], 'staging has keys of its own')
  t.equal(stagingConfig.data['plans.yaml'], productionConfig.data['plans.yaml'], 'and the plans production has')
})

/** The checks every rendering must pass: the base alone, and each overlay's output. */
function checkRendering (which: Rendering): void {
  const k8sDocs = rendered(which)
  const find = (kind: string, name: string): Json | undefined => k8sDocs.find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc

  t.test(`k8s ${which}: every manifest passes its Kubernetes / Prometheus Operator schema, unknown fields refused`, async (t) => {
    t.ok(k8sDocs.length >= 12, `${k8sDocs.length} documents`)
    for (const { file, doc } of k8sDocs) {
      t.same(validateStrict(doc), [], `${file}: ${doc.kind} ${doc.metadata?.name}`)
    }
  })

  t.test(`k8s ${which}: kinds the deployment needs`, async (t) => {
    const kinds = k8sDocs.map((d) => `${d.doc.kind}/${d.doc.metadata.name}`).sort()
    for (const expected of [
      'ConfigMap/petstore-gateway-config', 'Deployment/petstore-backend', 'Deployment/petstore-gateway',
      'HorizontalPodAutoscaler/petstore-gateway', 'NetworkPolicy/petstore-backend', 'NetworkPolicy/petstore-gateway',
      'PersistentVolumeClaim/petstore-backend-data', 'PodDisruptionBudget/petstore-gateway', 'Secret/petstore-gateway',
      'Service/petstore-backend', 'Service/petstore-gateway', 'Service/petstore-gateway-admin', 'ServiceMonitor/petstore-gateway',
      'Ingress/petstore-gateway', 'StatefulSet/petstore-redis', 'Service/petstore-redis', 'NetworkPolicy/petstore-redis'
    ]) t.ok(kinds.includes(expected), expected)
  })


  t.test(`k8s ${which}: every workload is hardened and sized`, async (t) => {
    const deployments = k8sDocs.filter((d) => d.doc.kind === 'Deployment').map((d) => d.doc)
    const images = new Set<string>()
    for (const d of deployments) {
      const name = d.metadata.name as string
      const pod = d.spec.template.spec as Json
      t.ok(matches(d.spec.selector.matchLabels, d.spec.template.metadata.labels), `${name}: selector matches its pods`)
      t.equal(pod.securityContext?.runAsNonRoot, true, `${name}: runAsNonRoot`)
      t.equal(pod.securityContext?.seccompProfile?.type, 'RuntimeDefault', `${name}: seccomp RuntimeDefault`)
      t.equal(pod.automountServiceAccountToken, false, `${name}: no service account token`)
      const user = /^(\d+)/.exec(parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')).stages.at(-1)?.instructions.filter((i) => i.keyword === 'USER').at(-1)?.args ?? '')?.[1]
      t.equal(String(pod.securityContext?.runAsUser), user, `${name}: runAsUser is the image's USER`)
      for (const c of pod.containers as Json[]) {
        images.add(c.image as string)
        t.notMatch(c.image, /:latest$|^[^:]+$/, `${name}/${c.name}: image has a pinned tag`)
        t.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${name}/${c.name}: cpu and memory requests`)
        t.ok(c.resources?.limits?.memory, `${name}/${c.name}: memory limit`)
        t.equal(c.securityContext?.allowPrivilegeEscalation, false, `${name}/${c.name}: no privilege escalation`)
        t.equal(c.securityContext?.readOnlyRootFilesystem, true, `${name}/${c.name}: read-only root filesystem`)
        t.same(c.securityContext?.capabilities?.drop, ['ALL'], `${name}/${c.name}: drops all capabilities`)
        t.notOk(c.command, `${name}/${c.name}: keeps the image ENTRYPOINT (tini)`)
        t.ok(c.readinessProbe && c.livenessProbe, `${name}/${c.name}: readiness and liveness probes`)
        t.equal(envValue(c, 'NODE_ENV'), 'production', `${name}/${c.name}: NODE_ENV=production`)
        for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe].filter(Boolean) as Json[]) {
          const port = probe.httpGet?.port ?? probe.tcpSocket?.port
          t.ok(portNumber(c, port), `${name}/${c.name}: probe port ${port} is a container port`)
        }
      }
    }
    t.equal(images.size, 1, 'one image for both roles')
  })

  t.test(`k8s ${which}: gateway deployment — ports from the env, probes on the admin port, drain budget, live config`, async (t) => {
    const deployment = find('Deployment', 'petstore-gateway') as Json
    const pod = deployment.spec.template.spec as Json
    const c = containerOf(deployment)
    t.same(c.args, ['node', 'dist/gateway/server.js'], 'gateway role')
    for (const name of envOf(c).keys()) t.ok(GATEWAY_ENV.has(name), `env ${name} is read by the gateway`)
    t.equal(portNumber(c, 'http'), Number(envValue(c, 'GATEWAY_PORT') ?? DEFAULT_GATEWAY_PORT), 'containerPort http = GATEWAY_PORT')
    t.equal(portNumber(c, 'admin'), Number(envValue(c, 'ADMIN_PORT') ?? DEFAULT_ADMIN_PORT), 'containerPort admin = ADMIN_PORT')
    t.equal(envValue(c, 'ADMIN_HOST'), '0.0.0.0', 'admin port reachable by the kubelet and Prometheus')
    t.equal(c.readinessProbe.httpGet?.path, '/readyz', 'readiness on /readyz')
    t.equal(c.livenessProbe.httpGet?.path, '/healthz', 'liveness on /healthz')
    for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
      t.equal(portNumber(c, probe.httpGet.port), portNumber(c, 'admin'), `${probe.httpGet.path} probed on the admin port`)
    }
    t.equal(deployment.spec.replicas, undefined, 'replicas left to the HorizontalPodAutoscaler')
    t.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0, 'rolling updates never drop below capacity')

    const adminToken = envOf(c).get('ADMIN_TOKEN')?.valueFrom?.secretKeyRef
    const secret = find('Secret', adminToken?.name) as Json
    t.ok(secret?.stringData?.[adminToken?.key] ?? secret?.data?.[adminToken?.key], 'ADMIN_TOKEN comes from the Secret')
    t.notOk(adminToken?.optional, 'and is required')
    for (const name of ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS', 'REDIS_SENTINEL_NAME']) {
      const ref = envOf(c).get(name)?.valueFrom?.secretKeyRef
      t.equal(ref?.name, adminToken?.name, `${name} from the same Secret (may hold a password)`)
    }

    // SIGTERM after preStop; the drain (SHUTDOWN_GRACE_MS) must finish before the kubelet's SIGKILL.
    const preStop = c.lifecycle?.preStop?.exec?.command as string[] | undefined
    t.equal(preStop?.[0], 'sleep', 'preStop waits for endpoints to stop routing here')
    const preStopMs = Number(preStop?.[1]) * 1000
    const drainMs = Number(envValue(c, 'SHUTDOWN_GRACE_MS') ?? DEFAULT_SHUTDOWN_GRACE_MS)
    t.ok(preStopMs > 0 && preStopMs + drainMs < pod.terminationGracePeriodSeconds * 1000,
      `preStop ${preStopMs} ms + drain ${drainMs} ms < terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} s`)
    t.ok(drainMs >= Number(envValue(c, 'UPSTREAM_TIMEOUT_MS') ?? 0), 'the drain lets the slowest allowed upstream call finish')

    const mount = (c.volumeMounts as Json[]).find((m) => m.mountPath === envValue(c, 'CONFIG_DIR'))
    t.ok(mount, 'CONFIG_DIR is a mounted volume')
    t.notOk(mount?.subPath, 'mounted as a directory (a subPath mount never sees ConfigMap updates)')
    const volume = (pod.volumes as Json[]).find((v) => v.name === mount?.name)
    const configMap = find('ConfigMap', volume?.configMap?.name) as Json
    t.ok(configMap, 'from the gateway ConfigMap')
    t.same(Object.keys(configMap.data).sort(), [...CONFIG_FILES].sort(), 'the ConfigMap holds exactly the config files')
    checkGatewayConfig(t, configMap.data as ConfigTexts, 'ConfigMap petstore-gateway-config')

    const backendUrl = new URL(envValue(c, 'BACKEND_URL') as string)
    const backendService = find('Service', backendUrl.hostname) as Json
    t.ok(backendService, `BACKEND_URL names the Service ${backendUrl.hostname}`)
    t.equal(backendService?.spec.ports[0].port, Number(backendUrl.port), 'on its port')
  })

  t.test(`k8s ${which}: backend — one replica, Recreate, SQLite on a PersistentVolumeClaim, ClusterIP only`, async (t) => {
    const deployment = find('Deployment', 'petstore-backend') as Json
    const c = containerOf(deployment)
    t.same(c.args, ['node', 'dist/backend/server.js'], 'backend role')
    for (const name of envOf(c).keys()) t.ok(BACKEND_ENV.has(name), `env ${name} is read by the backend`)
    t.equal(deployment.spec.replicas, 1, 'one replica (one SQLite writer)')
    t.equal(deployment.spec.strategy.type, 'Recreate', 'Recreate: the old pod is gone before the new one opens the file')
    t.equal(envValue(c, 'BACKEND_HOST'), '0.0.0.0', 'listens on the pod address')
    t.equal(portNumber(c, 'http'), Number(envValue(c, 'BACKEND_PORT')), 'containerPort = BACKEND_PORT')
    t.equal(Number(envValue(c, 'BACKEND_PORT')), BACKEND_PORT, 'the default backend port (docs/decisions.md §8)')
    const mount = (c.volumeMounts as Json[]).find((m) => m.mountPath === posix.dirname(envValue(c, 'PETS_DB') as string))
    const volume = (deployment.spec.template.spec.volumes as Json[]).find((v) => v.name === mount?.name)
    const pvc = find('PersistentVolumeClaim', volume?.persistentVolumeClaim?.claimName) as Json
    t.same(pvc?.spec.accessModes, ['ReadWriteOnce'], 'PETS_DB on a ReadWriteOnce claim')
    t.equal(deployment.spec.template.spec.securityContext.fsGroup, deployment.spec.template.spec.securityContext.runAsGroup, 'the volume is writable by the app user')
    const service = find('Service', 'petstore-backend') as Json
    t.equal(service.spec.type, 'ClusterIP', 'backend Service is ClusterIP')
    t.ok(matches(service.spec.selector, deployment.spec.template.metadata.labels), 'and selects the backend pods')
    t.equal(portNumber(c, service.spec.ports[0].targetPort), BACKEND_PORT, 'targetPort resolves to the backend port')
  })

  t.test(`k8s ${which}: services, autoscaler, disruption budget and ServiceMonitor target the gateway`, async (t) => {
    const deployment = find('Deployment', 'petstore-gateway') as Json
    const labels = deployment.spec.template.metadata.labels as Record<string, string>
    const c = containerOf(deployment)
    for (const name of ['petstore-gateway', 'petstore-gateway-admin']) {
      const service = find('Service', name) as Json
      t.equal(service.spec.type, 'ClusterIP', `${name}: ClusterIP`)
      t.ok(matches(service.spec.selector, labels), `${name}: selects the gateway pods`)
      for (const port of service.spec.ports as Json[]) t.ok(portNumber(c, port.targetPort), `${name}: targetPort ${port.targetPort} is a container port`)
    }
    t.equal(portNumber(c, find('Service', 'petstore-gateway')?.spec.ports[0].targetPort), portNumber(c, 'http'), 'public Service → public port')
    t.equal(portNumber(c, find('Service', 'petstore-gateway-admin')?.spec.ports[0].targetPort), portNumber(c, 'admin'), 'admin Service → admin port')

    const hpa = find('HorizontalPodAutoscaler', 'petstore-gateway') as Json
    t.same(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'petstore-gateway' }, 'HPA scales the gateway')
    t.ok(hpa.spec.minReplicas >= 2 && hpa.spec.maxReplicas > hpa.spec.minReplicas, 'at least two replicas, room to grow')
    t.ok(c.resources.requests.cpu, 'CPU utilisation target has a CPU request to divide by')
    const pdb = find('PodDisruptionBudget', 'petstore-gateway') as Json
    t.ok(matches(pdb.spec.selector.matchLabels, labels), 'PDB selects the gateway pods')
    t.ok(pdb.spec.maxUnavailable < hpa.spec.minReplicas || pdb.spec.minAvailable < hpa.spec.minReplicas, 'PDB leaves a gateway up at the minimum scale')

    const monitor = find('ServiceMonitor', 'petstore-gateway') as Json
    const admin = find('Service', 'petstore-gateway-admin') as Json
    t.ok(matches(monitor.spec.selector.matchLabels, admin.metadata.labels), 'ServiceMonitor selects the admin Service')
    t.notOk(matches(monitor.spec.selector.matchLabels, find('Service', 'petstore-gateway')?.metadata.labels), 'and not the public one')
    const endpoint = monitor.spec.endpoints[0] as Json
    t.ok((admin.spec.ports as Json[]).some((p) => p.name === endpoint.port), 'on the admin port')
    t.equal(endpoint.path, '/metrics', '/metrics')
    const tokenRef = envOf(c).get('ADMIN_TOKEN')?.valueFrom?.secretKeyRef
    t.same([endpoint.authorization?.credentials?.name, endpoint.authorization?.credentials?.key], [tokenRef?.name, tokenRef?.key], 'scrapes with the admin token')
  })

  t.test(`k8s ${which}: network policies — backend only from gateways, admin port only from monitoring`, async (t) => {
    const gatewayLabels = find('Deployment', 'petstore-gateway')?.spec.template.metadata.labels as Record<string, string>
    const backendLabels = find('Deployment', 'petstore-backend')?.spec.template.metadata.labels as Record<string, string>
    const c = containerOf(find('Deployment', 'petstore-gateway'))
    const adminPort = portNumber(c, 'admin')
    const publicPort = portNumber(c, 'http')

    const backend = find('NetworkPolicy', 'petstore-backend') as Json
    t.ok(matches(backend.spec.podSelector.matchLabels, backendLabels), 'applies to the backend pods')
    t.ok(backend.spec.policyTypes.includes('Ingress'), 'isolates their ingress')
    for (const rule of backend.spec.ingress as Json[]) {
      t.ok(rule.from?.length > 0 && (rule.from as Json[]).every((f) => matches(f.podSelector?.matchLabels, gatewayLabels) && f.namespaceSelector === undefined && f.ipBlock === undefined), 'every peer is a gateway pod')
      t.same((rule.ports as Json[]).map((p) => p.port), [BACKEND_PORT], 'on the backend port only')
    }

    const gateway = find('NetworkPolicy', 'petstore-gateway') as Json
    t.ok(matches(gateway.spec.podSelector.matchLabels, gatewayLabels), 'applies to the gateway pods')
    t.ok(gateway.spec.policyTypes.includes('Ingress'), 'isolates their ingress')
    const rules = gateway.spec.ingress as Json[]
    const opensTo = (port: number | undefined): Json[] => rules.filter((r) => r.ports === undefined || (r.ports as Json[]).some((p) => p.port === port || portNumber(c, p.port) === port))
    t.ok(opensTo(publicPort).length > 0, 'the public port is open')
    const adminRules = opensTo(adminPort)
    t.ok(adminRules.length > 0, 'the admin port has a rule')
    for (const rule of adminRules) {
      t.ok(rule.from?.length > 0, 'admin rule names its peers')
      for (const peer of rule.from as Json[] ?? []) {
        t.same(peer.namespaceSelector?.matchLabels, { 'kubernetes.io/metadata.name': 'monitoring' }, 'admin port only from the monitoring namespace')
      }
    }
  })

  t.test(`k8s ${which}: Redis — AOF everysec on a PersistentVolumeClaim, the compose settings, only from gateways`, async (t) => {
    const redis = find('StatefulSet', 'petstore-redis') as Json
    const pod = redis.spec.template.spec as Json
    const c = containerOf(redis)
    t.equal(redis.spec.replicas, 1, 'one primary: one place for the counts')
    t.ok(matches(redis.spec.selector.matchLabels, redis.spec.template.metadata.labels), 'selector matches its pods')
    const options = redisServerOptions(c.args as string[])
    for (const [name, value] of Object.entries(REDIS_PERSISTENCE)) t.equal(options.get(name), value, `${name} ${value}`)
    const compose = redisServerOptions(composeFile({}).services.redis.command as string[])
    t.same([...options].sort(), [...compose].sort(), 'the same redis-server options as the compose stack')
    const mount = (c.volumeMounts as Json[]).find((m) => m.mountPath === options.get('dir'))
    const claim = (redis.spec.volumeClaimTemplates as Json[] | undefined ?? []).find((v) => v.metadata.name === mount?.name)
    t.ok(claim, `its dir (${options.get('dir')}) is a volumeClaimTemplate's claim: it outlives the pod`)
    t.same(claim?.spec.accessModes, ['ReadWriteOnce'], 'ReadWriteOnce')
    t.ok(claim?.spec.resources.requests.storage, `sized (${claim?.spec.resources.requests.storage})`)
    t.notOk((pod.volumes as Json[] | undefined ?? []).some((v) => v.name === mount?.name), 'not shadowed by a pod volume of the same name (an emptyDir would forget)')
    t.equal(pod.securityContext?.runAsNonRoot, true, 'runAsNonRoot')
    t.equal(pod.securityContext?.fsGroup, pod.securityContext?.runAsGroup, 'the claim is writable by the redis user')
    t.equal(pod.automountServiceAccountToken, false, 'no service account token')
    t.notMatch(c.image, /:latest$|^[^:]+$/, 'image has a pinned tag')
    t.equal(c.image, composeFile({}).services.redis.image, 'the compose stack\'s image')
    t.equal(c.securityContext?.readOnlyRootFilesystem, true, 'read-only root filesystem (Redis writes only its dir)')
    t.same(c.securityContext?.capabilities?.drop, ['ALL'], 'drops all capabilities')
    t.ok(c.resources?.requests?.memory && c.resources?.limits?.memory, 'memory request and limit')
    t.ok(c.readinessProbe && c.livenessProbe, 'readiness and liveness probes')

    const service = find('Service', redis.spec.serviceName) as Json
    t.ok(service && matches(service.spec.selector, redis.spec.template.metadata.labels), `its Service ${redis.spec.serviceName} selects it`)
    const secret = rendered(which).find((d) => d.file === 'secret.example.yaml')?.doc as Json
    const url = new URL(secret.stringData['redis-url'] as string)
    t.equal(url.hostname, service?.metadata.name, 'the example Secret\'s redis-url names it')
    t.equal(Number(url.port), service?.spec.ports[0].port, 'on its port')
    t.equal(portNumber(c, service?.spec.ports[0].targetPort), Number(url.port), 'which is the container\'s')

    const gatewayLabels = find('Deployment', 'petstore-gateway')?.spec.template.metadata.labels as Record<string, string>
    const policy = find('NetworkPolicy', 'petstore-redis') as Json
    t.ok(matches(policy.spec.podSelector.matchLabels, redis.spec.template.metadata.labels), 'a NetworkPolicy applies to the Redis pod')
    for (const rule of policy.spec.ingress as Json[]) {
      t.ok(rule.from?.length > 0 && (rule.from as Json[]).every((f) => matches(f.podSelector?.matchLabels, gatewayLabels) && f.namespaceSelector === undefined), 'every peer is a gateway pod')
      t.same((rule.ports as Json[]).map((p) => p.port), [Number(url.port)], 'on the Redis port only')
    }
  })

  // ---------------------------------------------------------------------------------------------
}

for (const which of RENDERINGS) checkRendering(which)

// The manifests probe /readyz on the admin port, and HTTP probes cannot carry a Secret: the admin
// app must answer the probe paths without ADMIN_TOKEN (and keep guarding everything else).

t.test('the admin app answers the Kubernetes probe paths without ADMIN_TOKEN', async (t) => {
  const find = (kind: string, name: string): Json | undefined => rendered('base').find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc
  // The admin app reads the gateway's liveness (runtime/liveness.ts), as in a real gateway.
  const gateway = Fastify()
  const readiness = new ReadinessRegistry()
  await gateway.register(livenessPlugin, { readiness })
  await gateway.ready()
  const admin = await buildAdmin({ gateway, readiness, token: 'probe-test-token' })
  t.teardown(async () => { await admin.close(); await gateway.close() })
  const deployment = find('Deployment', 'petstore-gateway') as Json
  const c = containerOf(deployment)
  const paths = [c.startupProbe, c.readinessProbe, c.livenessProbe].map((p: Json) => p.httpGet.path as string)
  for (const path of new Set(paths)) {
    const res = await admin.inject({ method: 'GET', url: path })
    t.equal(res.statusCode, 200, `${path} without a token → 200`)
  }
  const guarded = await admin.inject({ method: 'GET', url: '/admin/bans' })
  t.equal(guarded.statusCode, 401, 'the admin API still needs the token')
})
