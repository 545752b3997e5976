// Copies a tree (the node_modules the copy benchmarks use) from Node with
// the kopiru binding, fs.promises.cp (COPYFILE_FICLONE), fs-extra's copy and
// a per-file @reflink/reflink loop (where it installs and works), and with
// the kopiru command, on fresh loop ext4 and XFS filesystems; interleaved
// rounds (one of each per round, order rotated, `rm -rf dst; sync` before
// each), medians. Also the event loop's delay (p99) during the binding's
// copies. As root.
//
//   cd bindings/node/bench && npm install && node bench.mjs \
//     --tree /var/tmp/kc/node_modules --runs 5 --fs ext4,xfs --kopiru ../../../target/release/kopiru
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, mkdirSync, rmSync, readdirSync, symlinkSync, readlinkSync, constants } from 'node:fs'
import fsp from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { values: args } = parseArgs({
  options: {
    tree: { type: 'string', default: '/var/tmp/kc/node_modules' },
    runs: { type: 'string', default: '5' },
    fs: { type: 'string', default: 'ext4,xfs' },
    kopiru: { type: 'string' },
    size: { type: 'string', default: '2048' },
  },
})
const runs = Number(args.runs)
const kopiru = require('kopiru')

function optional(name) {
  try {
    return require(name)
  } catch (e) {
    console.error(`(${name} not installed: ${e.code}; left out)`)
    return null
  }
}
const fsExtra = optional('fs-extra')
const reflink = optional('@reflink/reflink')

const mounts = []
process.on('exit', () => {
  for (const m of mounts) {
    spawnSync('umount', [m.dir])
    rmSync(m.base, { recursive: true, force: true })
  }
})
function mountFresh(type) {
  const base = mkdtempSync(join(tmpdir(), `kopiru-bench-${type}-`))
  const img = join(base, 'fs.img')
  const dir = join(base, 'mnt')
  mkdirSync(dir)
  execFileSync('truncate', ['-s', `${args.size}M`, img])
  if (type === 'xfs') execFileSync('mkfs.xfs', ['-q', '-f', '-m', 'reflink=1', img])
  else execFileSync(`mkfs.${type}`, ['-q', '-F', img])
  execFileSync('mount', ['-o', 'loop', img, dir])
  mounts.push({ dir, base })
  return dir
}

/** A per-file @reflink/reflink loop: directories made, symlinks re-made,
 * each file cloned (no fallback: it fails where the filesystem cannot). */
async function reflinkTree(src, dst) {
  await fsp.mkdir(dst)
  for (const e of await fsp.readdir(src, { withFileTypes: true })) {
    const s = join(src, e.name)
    const d = join(dst, e.name)
    if (e.isDirectory()) await reflinkTree(s, d)
    else if (e.isSymbolicLink()) await fsp.symlink(await fsp.readlink(s), d)
    else await reflink.reflinkFile(s, d)
  }
}

const tools = {
  'kopiru (binding)': async (src, dst) => {
    await kopiru.copy(src, dst, { sync: 'none', onProgress: () => {} })
  },
  // The delay monitor wakes the event loop every millisecond, which takes
  // CPU from the copy on a small machine: its copies are timed apart.
  'kopiru (binding, delay monitored)': async (src, dst) => {
    const h = monitorEventLoopDelay({ resolution: 1 })
    h.enable()
    await kopiru.copy(src, dst, { sync: 'none', onProgress: () => {} })
    h.disable()
    return { p99: h.percentile(99) / 1e6 }
  },
  'fs.promises.cp': (src, dst) => fsp.cp(src, dst, { recursive: true, mode: constants.COPYFILE_FICLONE, verbatimSymlinks: true }),
}
if (fsExtra) tools['fs-extra copy'] = (src, dst) => fsExtra.copy(src, dst)
if (reflink) tools['@reflink/reflink loop'] = reflinkTree
if (args.kopiru) {
  tools['kopiru (command)'] = (src, dst) => {
    execFileSync(args.kopiru, ['copy', '--sync', 'none', src, dst], { stdio: 'inherit' })
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
}

const results = {}
for (const type of args.fs.split(',')) {
  const mnt = mountFresh(type)
  const src = join(mnt, 'src')
  execFileSync('cp', ['-a', args.tree, src])
  execFileSync('sync')
  const names = Object.keys(tools)
  const times = Object.fromEntries(names.map((n) => [n, []]))
  const fails = {}
  const p99s = []
  for (let r = 0; r < runs; r++) {
    const order = names.map((_, i) => names[(i + r) % names.length])
    for (const name of order) {
      const dst = join(mnt, 'dst')
      rmSync(dst, { recursive: true, force: true })
      execFileSync('sync')
      const t0 = performance.now()
      try {
        const extra = await tools[name](src, dst)
        times[name].push((performance.now() - t0) / 1000)
        if (extra && extra.p99 != null) p99s.push(extra.p99)
      } catch (e) {
        fails[name] = `${e.code || e.name}: ${String(e.message).split('\n')[0]}`
      }
    }
  }
  rmSync(join(mnt, 'dst'), { recursive: true, force: true })
  const binding = median(times['kopiru (binding)'])
  console.log(`\n${type}: ${args.tree} (${readdirSync(args.tree).length} top-level entries), ${runs} interleaved rounds, median seconds`)
  console.log('| tool | median s | runs (s) | binding faster by |')
  console.log('| --- | --- | --- | --- |')
  for (const name of names) {
    if (fails[name]) {
      console.log(`| ${name} | failed | ${fails[name]} | |`)
      continue
    }
    const m = median(times[name])
    console.log(`| ${name} | ${m.toFixed(3)} | ${times[name].map((x) => x.toFixed(3)).join(' ')} | ${(m / binding).toFixed(2)}× |`)
  }
  console.log(`event loop delay p99 during the monitored copies: ${p99s.map((x) => x.toFixed(1)).join(', ')} ms (median ${median(p99s).toFixed(1)})`)
  results[type] = { times, fails, p99s }
}
