// The two public documents of docs/decisions.md §1 on the public port, without a key: the OpenAPI
// description at /v1/openapi.json, built once per config snapshot, and the docs page at /docs
// (/docs/ redirects to it), Swagger UI served from the swagger-ui-dist package (no CDN). Without a
// valid key they are outside the anonymous limit (the limiter skips routes marked `public`), so the
// 401s of failed keys never cost a newcomer the docs page; held in memory, they cost less than a 429
// and are bounded by the connection caps and load shedding. A cold page load is 4 requests (page,
// stylesheet, script, description); the assets are immutable, so a reload is 2.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { gzipSync } from 'node:zlib'
import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { registerMethodNotAllowed } from '../../interface/errors.js'
import type { ConfigSnapshot } from '../config/types.js'
import { buildOpenApiDocument, type OpenApiDocumentOptions } from './document.js'

export const OPENAPI_PATH = '/v1/openapi.json'
export const DOCS_PATH = '/docs'
export const DOCS_ASSET_PREFIX = '/docs/static/'
export const DEFAULT_DOCS_TITLE = 'Pet Store API'
const IMMUTABLE = 'public, max-age=31536000, immutable'

export interface OpenApiPluginOptions extends OpenApiDocumentOptions {
  /** Serve the docs page and its assets. Default true. */
  docs?: boolean
}

interface Asset {
  readonly type: string
  readonly body: Buffer
  gzipped: Buffer | undefined
}

const swaggerUiDir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
const swaggerUiVersion = (JSON.parse(readFileSync(join(swaggerUiDir, 'package.json'), 'utf8')) as { version: string }).version

function loadAssets (): ReadonlyMap<string, Asset> {
  const files: Array<[string, string]> = [['swagger-ui.css', 'text/css; charset=utf-8'], ['swagger-ui-bundle.js', 'text/javascript; charset=utf-8']]
  return new Map(files.map(([name, type]) => [name, { type, body: readFileSync(join(swaggerUiDir, name)), gzipped: undefined }]))
}

function initializer (): string {
  const options = {
    url: OPENAPI_PATH,
    dom_id: '#swagger-ui',
    deepLinking: true,
    displayOperationId: true,
    displayRequestDuration: true,
    showExtensions: true,
    tryItOutEnabled: true,
    persistAuthorization: false,
    validatorUrl: null,
    layout: 'BaseLayout'
  }
  return `window.ui = SwaggerUIBundle(Object.assign(${JSON.stringify(options)}, { presets: [SwaggerUIBundle.presets.apis] }))`
}

/** The page and its Content-Security-Policy: same-origin only, the one inline script allowed by its hash. */
function docsPage (): { html: string, csp: string } {
  const script = initializer()
  const hash = createHash('sha256').update(script).digest('base64')
  const v = encodeURIComponent(swaggerUiVersion)
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${DEFAULT_DOCS_TITLE}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${DOCS_ASSET_PREFIX}swagger-ui.css?v=${v}">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${DOCS_ASSET_PREFIX}swagger-ui-bundle.js?v=${v}"></script>
<script>${script}</script>
</body>
</html>
`
  const csp = [
    "default-src 'none'",
    `script-src 'self' 'sha256-${hash}'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join('; ')
  return { html, csp }
}

function acceptsGzip (request: FastifyRequest): boolean {
  const accept = request.headers['accept-encoding']
  return typeof accept === 'string' && /\bgzip\b/.test(accept)
}

function sendAsset (request: FastifyRequest, reply: FastifyReply, asset: Asset): FastifyReply {
  reply.header('content-type', asset.type).header('cache-control', IMMUTABLE).header('vary', 'accept-encoding')
    .header('x-content-type-options', 'nosniff')
  if (acceptsGzip(request)) {
    asset.gzipped ??= gzipSync(asset.body)
    return reply.header('content-encoding', 'gzip').send(asset.gzipped)
  }
  return reply.send(asset.body)
}

async function publicDocuments (scope: FastifyInstance, opts: OpenApiPluginOptions): Promise<void> {
  // Everything in this scope, 405 answers included, is public: no 401, and without a valid key not limited.
  scope.addHook('onRoute', function markPublic (route) {
    route.config = { ...route.config, public: true }
  })

  const documents = new WeakMap<ConfigSnapshot, string>()
  const documentOptions: OpenApiDocumentOptions = { version: opts.version, serverUrl: opts.serverUrl, publicBaseUrl: opts.publicBaseUrl, stagingBaseUrl: opts.stagingBaseUrl }
  scope.get(OPENAPI_PATH, async function openApiDocument (request, reply) {
    let text = documents.get(request.snapshot)
    if (text === undefined) {
      text = JSON.stringify(buildOpenApiDocument(request.snapshot, documentOptions), null, 2)
      documents.set(request.snapshot, text)
    }
    return reply.type('application/json; charset=utf-8').header('cache-control', 'no-cache').send(text)
  })
  registerMethodNotAllowed(scope, OPENAPI_PATH, ['GET'])

  if (opts.docs === false) return
  const page = docsPage()
  const assets = loadAssets()
  scope.get(DOCS_PATH, async function docs (_request, reply) {
    return reply.type('text/html; charset=utf-8')
      .header('content-security-policy', page.csp)
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'no-cache')
      .send(page.html)
  })
  registerMethodNotAllowed(scope, DOCS_PATH, ['GET'])
  // `/docs/` is what people type; it is public too, so sending them on reveals nothing.
  scope.get(`${DOCS_PATH}/`, async function docsSlash (_request, reply) {
    return reply.redirect(DOCS_PATH, 301)
  })
  registerMethodNotAllowed(scope, `${DOCS_PATH}/`, ['GET'])
  for (const [name, asset] of assets) {
    const url = DOCS_ASSET_PREFIX + name
    scope.get(url, async function docsAsset (request, reply) { return sendAsset(request, reply, asset) })
    registerMethodNotAllowed(scope, url, ['GET'])
  }
}

export const openApiPlugin = fp<OpenApiPluginOptions>(async function openApiPlugin (app, opts) {
  await app.register(publicDocuments, opts)
}, { name: 'gateway-openapi', dependencies: ['gateway-config', 'gateway-require-key'] })
