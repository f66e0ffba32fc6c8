// The package's `./client` entry: the polite typed client and the generated interface types.
export * from './client.js'
export type { components, operations, paths } from './openapi-types.js'
