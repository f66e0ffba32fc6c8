// Renders a kustomization the way `kubectl kustomize` does, for the subset deploy/k8s uses, so the
// manifest tests check what each overlay would apply without kubectl or a cluster (neither the npm
// registry nor Debian ships a kustomize binary this project can install). Supported, and refused
// when anything else appears: `resources` (files, and directories holding a kustomization),
// `namespace` (set on every namespaced object; a Namespace object keeps its own name), `images`
// (newName / newTag) and `patches` with `path:` to strategic-merge patches. Strategic merge as
// Kubernetes defines it for the fields used here: maps merge recursively, lists of containers, env
// vars and volumes merge by `name` (volumeMounts by `mountPath`), any other list is replaced,
// `null` deletes a field.
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseAllDocuments } from 'yaml'

export type Manifest = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const SUPPORTED_FIELDS = new Set(['apiVersion', 'kind', 'namespace', 'resources', 'images', 'patches'])
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  imagePullSecrets: 'name'
}
/** Kinds that are not namespaced, among those a kustomization of this project can hold. */
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass', 'CustomResourceDefinition'])

function loadDocs (path: string): Manifest[] {
  return parseAllDocuments(readFileSync(path, 'utf8')).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors.map((e) => e.message).join('; ')}`)
    return doc.toJS() as Manifest
  }).filter((doc) => doc !== null && doc !== undefined)
}

function isObject (value: unknown): value is Manifest {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Strategic merge of `patch` into `target` (a new object; neither argument is changed). */
export function strategicMerge (target: unknown, patch: unknown, field = ''): unknown {
  if (Array.isArray(patch)) {
    const key = MERGE_KEYS[field]
    if (key === undefined || !Array.isArray(target)) return structuredClone(patch)
    const merged = target.map((item) => structuredClone(item) as unknown)
    for (const item of patch) {
      const at = merged.findIndex((m) => isObject(m) && isObject(item) && m[key] === item[key])
      if (at >= 0) merged[at] = strategicMerge(merged[at], item)
      else merged.push(structuredClone(item))
    }
    return merged
  }
  if (!isObject(patch) || !isObject(target)) return structuredClone(patch)
  const merged: Manifest = structuredClone(target)
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) delete merged[name]
    else merged[name] = name in merged ? strategicMerge(merged[name], value, name) : structuredClone(value)
  }
  return merged
}

function identity (doc: Manifest): string {
  return `${doc.apiVersion as string}/${doc.kind as string}/${doc.metadata?.name as string}`
}

function setImages (doc: Manifest, images: Manifest[]): void {
  const pod = doc.spec?.template?.spec as Manifest | undefined
  for (const container of [...(pod?.containers ?? []), ...(pod?.initContainers ?? [])] as Manifest[]) {
    const [name, tag] = String(container.image).split(':')
    const rule = images.find((i) => i.name === name)
    if (rule !== undefined) container.image = `${(rule.newName as string | undefined) ?? name}:${(rule.newTag as string | undefined) ?? tag}`
  }
}

/** The objects `kubectl kustomize dir` would print, in resource order. */
export function renderKustomization (dir: string): Manifest[] {
  const file = join(dir, 'kustomization.yaml')
  const [k] = loadDocs(file) as [Manifest]
  for (const field of Object.keys(k)) {
    if (!SUPPORTED_FIELDS.has(field)) throw new Error(`${file}: "${field}" is not supported by the test renderer (test/helpers/kustomize.ts)`)
  }
  let docs: Manifest[] = []
  for (const resource of (k.resources ?? []) as string[]) {
    const path = join(dir, resource)
    if (!existsSync(path)) throw new Error(`${file}: resource ${resource} does not exist`)
    docs.push(...(statSync(path).isDirectory() ? renderKustomization(path) : loadDocs(path)))
  }
  for (const entry of (k.patches ?? []) as Manifest[]) {
    if (typeof entry.path !== 'string' || Object.keys(entry).length !== 1) throw new Error(`${file}: only patches with a path are supported`)
    for (const patch of loadDocs(join(dir, entry.path))) {
      const at = docs.findIndex((d) => identity(d) === identity(patch))
      if (at < 0) throw new Error(`${relative(process.cwd(), join(dir, entry.path))}: no resource ${identity(patch)} to patch`)
      docs[at] = strategicMerge(docs[at], patch) as Manifest
    }
  }
  if (Array.isArray(k.images)) for (const doc of docs) setImages(doc, k.images as Manifest[])
  if (typeof k.namespace === 'string') {
    docs = docs.map((doc) => CLUSTER_SCOPED.has(doc.kind as string) ? doc : { ...doc, metadata: { ...doc.metadata, namespace: k.namespace } })
  }
  const seen = new Set<string>()
  for (const doc of docs) {
    if (seen.has(identity(doc))) throw new Error(`${file}: ${identity(doc)} appears twice`)
    seen.add(identity(doc))
  }
  return docs
}
