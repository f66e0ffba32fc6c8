// `npm test` runs each heavy repetition at a size that still asserts its property; `npm run
// test:long` (TEST_LONG=1) runs it at full size. One place reads the switch, so every file that
// scales down says the same thing the same way.

/** TEST_LONG=1: the heavy repetitions of the suite run too (npm run test:long). */
export const TEST_LONG = process.env.TEST_LONG === '1'

/** `short` in `npm test`, `long` under TEST_LONG=1. */
export function longOr<T> (short: T, long: T): T {
  return TEST_LONG ? long : short
}
