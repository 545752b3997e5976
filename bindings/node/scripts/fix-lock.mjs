// Makes package-lock.json usable by `npm ci` here and in CI. Run it after
// any `npm install` that rewrote the lock: node scripts/fix-lock.mjs
//
// Two gaps are filled, both optional per-platform packages of napi-rs's
// layout (`<name>-<os>-<cpu>[-<abi>]`):
// - our own: package.json's optionalDependencies (one package per target in
//   the `napi` block, as `napi pre-publish` writes them) are not published
//   yet;
// - our tools': the registry reachable here does not hold every platform
//   package of @napi-rs/cli's native dependencies at the version asked for.
// npm leaves an optional dependency it cannot resolve out of a new lock,
// and `npm ci` then refuses that lock as out of date ("Missing: ... from
// lock file"). Each missing one is added here, marked optional, with the
// os/cpu/libc its name says: npm skips it on other platforms and tolerates
// a failed fetch of an optional package on its own platform.
import { readFileSync, writeFileSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

// Our platform packages, from the napi targets.
const dirs = {
  'x86_64-unknown-linux-gnu': 'linux-x64-gnu',
  'x86_64-unknown-linux-musl': 'linux-x64-musl',
  'aarch64-unknown-linux-gnu': 'linux-arm64-gnu',
  'aarch64-apple-darwin': 'darwin-arm64',
  'x86_64-apple-darwin': 'darwin-x64',
  'x86_64-pc-windows-msvc': 'win32-x64-msvc',
}
const ours = {}
for (const t of pkg.napi.targets) {
  if (!dirs[t]) throw new Error(`no npm dir known for target ${t}`)
  ours[`${pkg.name}-${dirs[t]}`] = pkg.version
}
pkg.optionalDependencies = ours
writeFileSync(join(root, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`)

/** os/cpu/libc from a napi-rs platform package name, or null. */
function platformOf(name) {
  const m = /-(android|darwin|freebsd|linux|win32|openharmony|wasm32)-([a-z0-9]+)(?:-([a-z0-9]+))?$/.exec(name)
  if (!m) return null
  const [, os, cpu, abi] = m
  if (os === 'wasm32') return { cpu: ['wasm32'] }
  const p = { os: [os], cpu: [cpu === 'universal' ? 'arm64' : cpu] }
  if (cpu === 'universal') p.cpu = ['arm64', 'x64']
  if (os === 'linux' && abi) p.libc = [abi === 'musl' ? 'musl' : 'glibc']
  return p
}

const lockPath = join(root, 'package-lock.json')
const lock = JSON.parse(readFileSync(lockPath, 'utf8'))
lock.packages[''].optionalDependencies = ours
let added = 0
for (const [where, entry] of Object.entries(lock.packages)) {
  const opt = where === '' ? ours : entry.optionalDependencies
  if (!opt) continue
  for (const [name, version] of Object.entries(opt)) {
    // Resolved next to the dependent or at the top (the lock's layout).
    const near = `${where ? `${where}/` : ''}node_modules/${name}`
    if (lock.packages[near] || lock.packages[`node_modules/${name}`]) continue
    const plat = platformOf(name)
    if (!plat || !/^\d+\.\d+\.\d+/.test(version)) {
      throw new Error(`${where || 'package.json'}: optional dependency ${name}@${version} is not in the lock and not a platform package: run npm install`)
    }
    const e = { version, optional: true }
    if (where !== '' && entry.dev) e.dev = true
    Object.assign(e, plat)
    lock.packages[`node_modules/${name}`] = e
    added++
  }
}
// Keep the lock's order: sorted paths, the root first.
const sorted = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)))
lock.packages = sorted
writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`)
console.log(`fix-lock: optionalDependencies ${Object.keys(ours).join(', ')}; ${added} lock entries added`)
