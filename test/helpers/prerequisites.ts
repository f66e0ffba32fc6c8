// Run before `npm test` (and by .ci/run): the suite starts real redis-server processes, runs promtool
// and kubectl kustomize, and drives chromium, so a machine that lacks one of them is set up here, or told exactly what to
// install, instead of failing later in the middle of the suite. This file holds the one list.
//
// As root on a Debian-like system (apt-get on PATH) the missing packages are installed: one
// `apt-get update`, then one quiet, non-interactive `apt-get install` of just what is missing.
// Anywhere else (not root, no apt-get, another OS) it names the packages — with the Homebrew
// equivalent — and exits 1.
import '../../src/shared/runtime-guard.js'
import { spawnSync } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'
import { pathToFileURL } from 'node:url'

export interface Prerequisite {
  binary: string
  /** What the suite uses it for, for the one line printed before installing. */
  why: string
  debianPackage: string
  /** The Homebrew command that provides the binary, where there is one. */
  brew?: string
  /** Checked at this path instead of on PATH. */
  path?: string
}

export const PREREQUISITES: readonly Prerequisite[] = [
  { binary: 'redis-server', why: 'limiter tests run real Redis servers', debianPackage: 'redis-server', brew: 'brew install redis' },
  { binary: 'redis-cli', why: 'Redis tests inspect the servers', debianPackage: 'redis-tools', brew: 'brew install redis' },
  { binary: 'promtool', why: 'alert rules and scrape config are checked', debianPackage: 'prometheus', brew: 'brew install prometheus' },
  { binary: 'kubectl', why: 'the Kubernetes overlays are rendered with kubectl kustomize', debianPackage: 'kubernetes-client', brew: 'brew install kubectl' },
  {
    binary: 'chromium',
    why: 'the docs page is tested in a browser',
    debianPackage: 'chromium',
    brew: 'brew install --cask chromium, then set CHROMIUM_PATH to its binary',
    path: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
  }
]

function executable (path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

function onPath (binary: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir !== '' && executable(join(dir, binary)))
}

export function missingPrerequisites (): Prerequisite[] {
  return PREREQUISITES.filter((p) => p.path === undefined ? !onPath(p.binary) : !executable(p.path))
}

function canInstallWithApt (): boolean {
  return process.platform === 'linux' && process.getuid?.() === 0 && onPath('apt-get')
}

function aptGet (args: string[]): boolean {
  const result = spawnSync('apt-get', args, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  })
  return result.status === 0
}

function packagesOf (missing: Prerequisite[]): string[] {
  return [...new Set(missing.map((p) => p.debianPackage))]
}

function explain (missing: Prerequisite[]): void {
  console.error(`npm test needs ${missing.map((p) => p.binary).join(', ')}, which this machine lacks. Install them:`)
  console.error(`  Debian/Ubuntu (as root): apt-get update && apt-get install -y ${packagesOf(missing).join(' ')}`)
  const brew = [...new Set(missing.flatMap((p) => p.brew === undefined ? [] : [p.brew]))]
  if (brew.length > 0) console.error(`  macOS (Homebrew):        ${brew.join('; ')}`)
  console.error('  elsewhere: your package manager\'s redis, prometheus (for promtool), kubectl and chromium; CHROMIUM_PATH points at a browser outside /usr/bin')
}

/** Installs what is missing when it can; returns the process exit code. */
export function ensurePrerequisites (): number {
  const missing = missingPrerequisites()
  if (missing.length === 0) return 0
  if (!canInstallWithApt()) {
    explain(missing)
    return 1
  }
  const packages = packagesOf(missing)
  console.log(`npm test: installing ${packages.join(' ')} with apt-get (${missing.map((p) => `${p.binary}: ${p.why}`).join('; ')})`)
  if (!aptGet(['update', '-qq']) || !aptGet(['install', '-y', '-qq', ...packages])) {
    console.error(`npm test: apt-get could not install ${packages.join(' ')}`)
    explain(missing)
    return 1
  }
  const still = missingPrerequisites()
  if (still.length > 0) {
    console.error(`npm test: installed ${packages.join(' ')}, but ${still.map((p) => p.binary).join(', ')} is still not found`)
    explain(still)
    return 1
  }
  return 0
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = ensurePrerequisites()
