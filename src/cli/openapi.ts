// `npm run openapi`: writes the OpenAPI description the gateway serves (for the repository's config,
// or CONFIG_DIR's) to docs/openapi.json, and regenerates the client's types from it, so the
// committed document and types never drift from the schemas (a test checks both are current).
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import openapiTS, { astToString, COMMENT_HEADER, type OpenAPI3 } from 'openapi-typescript'
import { DEFAULT_CONFIG_DIR, loadConfigDir } from '../gateway/config/read-files.js'
import { buildOpenApiDocument, type JsonObject } from '../gateway/openapi/document.js'

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const DEFAULT_DOCUMENT_PATH = join(repoRoot, 'docs', 'openapi.json')
export const DEFAULT_TYPES_PATH = join(repoRoot, 'src', 'client', 'openapi-types.ts')

/** The document as it is written to disk: 2-space JSON and a final newline. */
export function documentText (document: JsonObject): string {
  return JSON.stringify(document, null, 2) + '\n'
}

/** The client's TypeScript types for a document, as openapi-typescript writes them. */
export async function clientTypesText (document: JsonObject): Promise<string> {
  const ast = await openapiTS(document as unknown as OpenAPI3, { exportType: true, defaultNonNullable: false })
  return COMMENT_HEADER + astToString(ast)
}

export interface OpenApiTargets {
  /** The config directory whose plans, routes and limits the document describes. */
  configDir: string
  documentPath: string
  typesPath: string
}

/** Writes the document and the client's types for `configDir`; the line the command prints. Nothing is written when the config is invalid. */
export async function writeOpenApi (targets: OpenApiTargets): Promise<string> {
  const document = buildOpenApiDocument(loadConfigDir(targets.configDir))
  const types = await clientTypesText(document)
  mkdirSync(dirname(targets.documentPath), { recursive: true })
  writeFileSync(targets.documentPath, documentText(document))
  writeFileSync(targets.typesPath, types)
  return `wrote ${targets.documentPath} and ${targets.typesPath} (config: ${targets.configDir})`
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const configDir = process.env.CONFIG_DIR ?? join(repoRoot, DEFAULT_CONFIG_DIR)
  writeOpenApi({ configDir, documentPath: DEFAULT_DOCUMENT_PATH, typesPath: DEFAULT_TYPES_PATH }).then((line) => { console.log(line) }, (err: unknown) => {
    console.error(err instanceof Error ? err.message : err)
    process.exitCode = 1
  })
}
