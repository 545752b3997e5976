// Helpers of the kopiru tests: scratch directories, real loop filesystems
// (ext4, XFS) made with truncate + mkfs + mount -o loop, and loud skips.
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, mkdirSync, writeFileSync, openSync, writeSync, closeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0

export function have(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0
}

/** Why a loop device with zstd images cannot be used here, or null. */
export function loopDeviceMissing() {
  if (!isRoot) return `needs root to attach a loop device (running as uid ${process.getuid()})`
  if (!have('zstd')) return 'zstd is not installed (apt-get install zstd)'
  if (!have('losetup')) return 'losetup is not installed'
  return null
}

export function sh(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts })
}

/** A scratch directory, removed when the process ends. */
export function scratch(prefix = 'kopiru-test-') {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  return dir
}

const mounted = []
process.on('exit', () => {
  for (const m of mounted.reverse()) {
    spawnSync('umount', ['-l', m.dir])
    rmSync(m.base, { recursive: true, force: true })
  }
})

/**
 * Why a filesystem of `type` cannot be made here, or null when it can:
 * the tests that need one skip with that reason (printed by the runner).
 */
export function cannotMount(type) {
  if (!isRoot) return `needs root to mount a loop ${type} filesystem (running as uid ${process.getuid()})`
  if (!have(`mkfs.${type}`)) return `mkfs.${type} is not installed (apt-get install ${type === 'xfs' ? 'xfsprogs' : 'e2fsprogs'})`
  if (!have('losetup')) return 'losetup is not installed (util-linux / mount)'
  return null
}

/**
 * A fresh filesystem of `type` ('ext4' or 'xfs') in a sparse image of
 * `sizeMiB`, mounted with -o loop; unmounted when the process ends.
 * Returns its mount point.
 */
export function mountFresh(type, sizeMiB) {
  const base = mkdtempSync(join(tmpdir(), `kopiru-${type}-`))
  const img = join(base, 'fs.img')
  const dir = join(base, 'mnt')
  mkdirSync(dir)
  sh('truncate', ['-s', `${sizeMiB}M`, img])
  if (type === 'xfs') sh('mkfs.xfs', ['-q', '-f', '-m', 'reflink=1', img])
  else sh(`mkfs.${type}`, ['-q', '-F', img])
  sh('mount', ['-o', 'loop', img, dir])
  mounted.push({ dir, base })
  return dir
}

/** The skip reason if `type` cannot be mounted, printed loudly. */
export function skipUnless(t, type) {
  const why = cannotMount(type)
  if (why) {
    t.skip(`SKIPPED: ${why}`)
    console.log(`!!! SKIPPED ${t.name}: ${why}`)
    return true
  }
  return false
}

/** Writes a file of `size` bytes of a cheap non-zero pattern (seeded). */
export function writePattern(path, size, seed = 1) {
  const len = Math.max(4, (Math.min(size, 1 << 20) + 3) & ~3)
  const chunk = Buffer.alloc(len)
  let x = (seed * 2654435761) >>> 0
  for (let i = 0; i < len; i += 4) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    chunk.writeUInt32LE(x, i)
  }
  const fd = openSync(path, 'w')
  try {
    for (let off = 0; off < size; off += len) writeSync(fd, chunk, 0, Math.min(len, size - off))
  } finally {
    closeSync(fd)
  }
}

/** A small tree: dirs, files of a few sizes, a symlink. */
export function makeTree(root, { files = 20, size = 64 << 10 } = {}) {
  mkdirSync(join(root, 'a', 'b'), { recursive: true })
  let bytes = 0
  for (let i = 0; i < files; i++) {
    const dir = i % 3 === 0 ? root : i % 3 === 1 ? join(root, 'a') : join(root, 'a', 'b')
    const n = (i % 4) * size + 17
    writePattern(join(dir, `f${i}.bin`), n, i + 1)
    bytes += n
  }
  writeFileSync(join(root, 'a', 'note.txt'), 'hello\n')
  bytes += 6
  sh('ln', ['-s', 'note.txt', join(root, 'a', 'link')])
  return { files: files + 1, bytes }
}
