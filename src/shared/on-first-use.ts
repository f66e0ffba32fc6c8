// Work a module needs for some of its callers only, done at the first call instead of at import. The
// gateway's main thread imports the config loader (for ConfigError, the snapshot's types and
// buildSnapshot) but parses config files only in the parse worker (config/worker-loader.ts): compiling
// the config files' JSON Schemas with ajv at import cost every gateway start about 0.3 s of CPU
// (docs/development.md) for validators that thread never ran. The result is made once per process and
// never changes, so it is a cache, not state: every caller sees the same value as if it were made at import.

/** A function that returns `make()`, calling `make` at its first call only. */
export function onFirstUse<T> (make: () => T): () => T {
  let made: { value: T } | undefined
  return () => {
    made ??= { value: make() }
    return made.value
  }
}
