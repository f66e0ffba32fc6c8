// One JSON log line per request (Fastify's own two request lines are off): who, which route,
// what status, how long, how long the backend took, what the limiter decided, and whether the route
// is deprecated (so ops can find who still calls it). Never the Authorization header or any key
// material: only the key id. With the gateway's own logger the line is written by request-line.ts.
import fp from 'fastify-plugin'
import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import type { Bindings, ChildLoggerOptions, LogFn, Logger } from 'pino'
import { ANONYMOUS_PLAN } from '../../shared/labels.js'
import { routeUrlOf } from './route-url.js'
import type { RequestLineWriter } from './request-line.js'

function roundMs (ms: number): number {
  return Math.round(ms * 1000) / 1000
}

function limiterDecision (request: FastifyRequest): { outcome: string, policy: string, remaining: number } | undefined {
  const decision = request.rateLimit
  if (!decision) return undefined
  return { outcome: decision.outcome, policy: decision.policy, remaining: decision.remaining }
}

export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'headers.authorization',
  'authorization'
]

function forward (logger: FastifyBaseLogger, method: LogFn, args: unknown[]): void {
  Reflect.apply(method, logger, args)
}

/**
 * A request's logger that makes pino's child (bindings: reqId) only when something logs through it.
 * Fastify makes one child per request, and pino's child() serializes its bindings each time; most
 * requests log nothing but their request line, which logRequest writes through the parent with the
 * bindings as its first fields — the same bytes as through the child.
 */
export class LazyChildLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined

  readonly parent: FastifyBaseLogger
  bindings: Bindings

  constructor (parent: FastifyBaseLogger, bindings: Bindings) {
    this.parent = parent
    this.bindings = bindings
  }

  /** More bindings for every later line (the trace id): merged before the child exists, else a child of it. */
  bind (bindings: Bindings): void {
    if (this.made === undefined) this.bindings = { ...this.bindings, ...bindings }
    else this.made = this.made.child(bindings)
  }

  private get real (): FastifyBaseLogger {
    this.made ??= this.parent.child(this.bindings)
    return this.made
  }

  get level (): string { return this.made?.level ?? this.parent.level }
  set level (level: string) { this.real.level = level }

  // Prototype methods, not per-instance arrow functions: no closures per request.
  fatal (...args: unknown[]): void { forward(this.real, this.real.fatal, args) }
  error (...args: unknown[]): void { forward(this.real, this.real.error, args) }
  warn (...args: unknown[]): void { forward(this.real, this.real.warn, args) }
  info (...args: unknown[]): void { forward(this.real, this.real.info, args) }
  debug (...args: unknown[]): void { forward(this.real, this.real.debug, args) }
  trace (...args: unknown[]): void { forward(this.real, this.real.trace, args) }
  silent (...args: unknown[]): void { forward(this.real, this.real.silent, args) }

  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, options)
  }
}

/** Fastify's `childLoggerFactory`: lazy unless the route asks for its own log level (then pino's child at once). */
export function lazyChildLoggerFactory (logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  for (const _ in opts) return logger.child(bindings, opts)
  return new LazyChildLogger(logger, bindings)
}

/** Adds `bindings` to every line the request logs from now on, its request line included, after its reqId. */
export function bindRequestLog (request: FastifyRequest, bindings: Bindings): void {
  const log = request.log
  if (log instanceof LazyChildLogger) log.bind(bindings)
  else request.log = log.child(bindings)
}

export interface RequestLogOptions {
  /** The writer of request lines (request-line.ts), given with the gateway's own logger. */
  requestLine?: RequestLineWriter | undefined
}

export const requestLogPlugin = fp<RequestLogOptions>(async function requestLogPlugin (app, { requestLine }) {
  app.addHook('onResponse', function logRequest (request, reply, done) {
    const log = request.log
    const lazy = log instanceof LazyChildLogger ? log : undefined
    // Through the parent, the bindings (reqId) come first, where the child would have put them.
    const fields = {
      ...lazy?.bindings,
      consumerId: request.consumer?.consumerId ?? null,
      keyId: request.consumer?.id ?? null,
      plan: request.consumer?.plan ?? ANONYMOUS_PLAN,
      method: request.method,
      route: routeUrlOf(request),
      status: reply.statusCode,
      durationMs: roundMs(reply.elapsedTime),
      upstreamMs: request.upstreamMs >= 0 ? roundMs(request.upstreamMs) : null,
      rateLimit: limiterDecision(request),
      deprecated: request.lifecycle?.deprecated === true ? true : undefined
    }
    if (lazy === undefined) log.info(fields, 'request')
    else if (requestLine !== undefined) requestLine(lazy.parent as Logger, fields, 'request')
    else lazy.parent.info(fields, 'request')
    done()
  })
}, { name: 'gateway-request-log', dependencies: ['gateway-authenticate'] })
