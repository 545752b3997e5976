// Peak RSS of a Node process flashing a 2 GiB .zst image to a loop device
// (written and read back), against an idle Node process and an idle one
// that loaded kopiru. Each in a child process of its own; maxRSS from
// process.resourceUsage(). As root; needs zstd and losetup.
//
//   cd bindings/node/bench && npm install && node flash-rss.mjs [--size-mib 2048]
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, openSync, writeSync, closeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { createRequire } from 'node:module'

const { values: args } = parseArgs({ options: { 'size-mib': { type: 'string', default: '2048' } } })
const size = Number(args['size-mib']) * 2 ** 20
const base = mkdtempSync(join(tmpdir(), 'kopiru-flash-rss-'))
let dev = null
process.on('exit', () => {
  if (dev) spawnSync('losetup', ['-d', dev])
  rmSync(base, { recursive: true, force: true })
})

// An image that does not compress to nothing: 1 MiB of pseudo-random
// bytes, each copy changed in its first word.
const raw = join(base, 'image.raw')
const chunk = Buffer.alloc(1 << 20)
let x = 12345
for (let i = 0; i < chunk.length; i += 4) {
  x = (Math.imul(x, 1103515245) + 12345) >>> 0
  chunk.writeUInt32LE(x, i)
}
const fd = openSync(raw, 'w')
for (let off = 0; off < size; off += chunk.length) {
  chunk.writeUInt32LE(off / chunk.length, 0)
  writeSync(fd, chunk)
}
closeSync(fd)
execFileSync('zstd', ['-q', '-1', '-T0', '--rm', raw, '-o', `${raw}.zst`])
execFileSync('truncate', ['-s', `${size + (64 << 20)}`, join(base, 'disk.img')])
dev = execFileSync('losetup', ['-f', '--show', join(base, 'disk.img')], { encoding: 'utf8' }).trim()

const entry = createRequire(import.meta.url).resolve('kopiru')
function child(code) {
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(r.stderr)
  return JSON.parse(r.stdout.trim().split('\n').at(-1))
}
const rss = 'JSON.stringify({ maxRssKiB: process.resourceUsage().maxRSS })'
const idle = child(`setTimeout(() => console.log(${rss}), 300)`)
const loaded = child(`require(${JSON.stringify(entry)}); setTimeout(() => console.log(${rss}), 300)`)
const flashed = child(`
  const { flash } = require(${JSON.stringify(entry)})
  const t0 = Date.now()
  flash(${JSON.stringify(`${raw}.zst`)}, [${JSON.stringify(dev)}], { onProgress: () => {} }).then((r) => {
    console.log(JSON.stringify({ ...JSON.parse(${rss}), seconds: (Date.now() - t0) / 1000, verified: r.devices[0].verified, imageBytes: r.imageBytes }))
  })`)
const mib = (k) => (k / 1024).toFixed(1)
console.log(`image: ${(size / 2 ** 30).toFixed(2)} GiB decoded, zstd; target ${dev}`)
console.log(`idle node:               ${mib(idle.maxRssKiB)} MiB`)
console.log(`idle node + kopiru:      ${mib(loaded.maxRssKiB)} MiB`)
console.log(`node flashing + verify:  ${mib(flashed.maxRssKiB)} MiB (${flashed.seconds.toFixed(1)} s, verified ${flashed.verified}, ${flashed.imageBytes} bytes)`)
console.log(`above idle node:         ${mib(flashed.maxRssKiB - idle.maxRssKiB)} MiB`)
