// The project runs on Node.js 24 LTS and on 22.18 or later (node:sqlite; the sources run unbuilt on its type
// stripping, on by default since 22.18, with a module.registerHooks resolve hook: src/ts-resolve.ts). `npm ci`
// brings Node 24 (package.json `optionalDependencies`: the registry's Node 24 binary for this
// OS and CPU), and every npm script runs it, whatever `node` the machine has. A process started some
// other way on an older Node stops here, in one line, instead of half-working (config reloads fail
// on Node 20). Entry points import this module first, so it runs before anything else is evaluated.
export const REQUIRED_NODE = { major: 22, minor: 18 }

/** The one line an unsupported runtime is refused with, or undefined when `version` is supported. */
export function runtimeProblem (version: string = process.versions.node): string | undefined {
  const [major = 0, minor = 0] = version.split('.').map(Number)
  if (major > REQUIRED_NODE.major || (major === REQUIRED_NODE.major && minor >= REQUIRED_NODE.minor)) return undefined
  return `petstore-gateway needs Node.js ${REQUIRED_NODE.major}.${REQUIRED_NODE.minor} or later, and this is ${version}: ` +
    'start it through npm (npm start, npm test, npm run start:gateway), which runs the Node 24 that npm ci installed'
}

const problem = runtimeProblem()
if (problem !== undefined) {
  process.stderr.write(problem + '\n')
  process.exit(1)
}
