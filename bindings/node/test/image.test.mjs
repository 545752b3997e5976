// image(): a loop device read back into a .zst image and a raw one with a
// block map, verified; the refusals; an abort leaving no output.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { existsSync, openSync, readSync, writeSync, closeSync, readFileSync, writeFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { image } from 'kopiru'
import { loopDeviceMissing, scratch, sh } from './helpers.mjs'

const SIZE = 32 << 20
let loopdev = null
let why = null
let base = null
before(() => {
  why = loopDeviceMissing()
  if (why) return
  base = scratch()
  const disk = join(base, 'disk.img')
  sh('truncate', ['-s', String(SIZE), disk])
  // Data in the first 8 MiB and at 20 MiB; zeros elsewhere (holes in a raw image).
  const fd = openSync(disk, 'r+')
  const buf = Buffer.alloc(1 << 20)
  for (const mib of [0, 1, 2, 3, 4, 5, 6, 7, 20]) {
    for (let i = 0; i < buf.length; i += 4) buf.writeUInt32LE((mib * 7919 + i * 2654435761) >>> 0, i)
    writeSync(fd, buf, 0, buf.length, mib << 20)
  }
  closeSync(fd)
  loopdev = sh('losetup', ['-f', '--show', disk]).trim()
})
after(() => {
  if (loopdev) sh('losetup', ['-d', loopdev])
})

function sha(path) {
  const h = createHash('sha256')
  const fd = openSync(path, 'r')
  const buf = Buffer.alloc(1 << 20)
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null)
      if (n === 0) break
      h.update(buf.subarray(0, n))
    }
  } finally {
    closeSync(fd)
  }
  return h.digest('hex')
}

function skipped(t, what) {
  if (!why) return false
  console.log(`!!! SKIPPED ${what}: ${why}`)
  t.skip(`SKIPPED: ${why}`)
  return true
}

test('image: a loop device into .zst, verified, with its SHA-256 and progress', async (t) => {
  if (skipped(t, 'image .zst')) return
  const out = join(base, 'card.img.zst')
  const seen = []
  const r = await image(loopdev, out, { level: 3, onProgress: (p) => seen.push(p) })
  assert.equal(r.format, 'zstd')
  assert.equal(r.level, 3)
  assert.equal(r.imageBytes, SIZE)
  assert.equal(r.verified, true)
  assert.equal(r.exitCode, 0)
  assert.deepEqual(r.errors, [])
  const want = sha(loopdev)
  assert.equal(r.sha256, want)
  assert.equal(r.outputBytes, readFileSync(out).length)
  sh('sh', ['-c', `zstd -dc '${out}' > '${join(base, 'back.raw')}'`])
  assert.equal(sha(join(base, 'back.raw')), want)
  const last = seen.at(-1)
  assert.equal(last.phase, 'done')
  assert.equal(last.read, SIZE)
  assert.equal(last.total, SIZE)
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].read >= seen[i - 1].read)
  assert.deepEqual(readdirSync(base).filter((n) => n.startsWith('.kopiru-tmp')), [])
})

test('image: raw with a block map: zeros are holes, the map lists the data', async (t) => {
  if (skipped(t, 'image raw + bmap')) return
  const out = join(base, 'card.img')
  const map = join(base, 'card.bmap')
  const r = await image(loopdev, out, { bmap: map })
  assert.equal(r.format, 'raw')
  assert.equal(r.mappedBytes, 9 << 20)
  assert.equal(r.bmap, map)
  assert.equal(sha(out), sha(loopdev))
  const used = Number(sh('du', ['-B1', out]).split(/\s/)[0])
  assert.ok(used < 12 << 20, `the raw image takes ${used} bytes on disk: zeros were written`)
  assert.match(readFileSync(map, 'utf8'), /<MappedBlocksCount>\s*2304\s*</)
})

test('image: the refusals, nothing written or replaced', async (t) => {
  if (skipped(t, 'image refusals')) return
  const existing = join(base, 'exists.img.zst')
  writeFileSync(existing, 'keep')
  await assert.rejects(image(loopdev, existing), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /exists/)
    // In this API's words: its option, not the command line's --force.
    assert.match(e.message, /force: true replaces it/)
    assert.doesNotMatch(e.message, /--force/)
    assert.equal(e.refusal, 'output-exists')
    return true
  })
  assert.equal(readFileSync(existing, 'utf8'), 'keep')
  await assert.rejects(image(loopdev, join(base, 'x.img.zst'), { level: 40 }), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /level 40: zstd takes 1 to 19/)
    return true
  })
  await assert.rejects(image(existing, join(base, 'y.img')), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /not a block device/)
    assert.match(e.message, /allowFile: true reads a regular file/)
    assert.doesNotMatch(e.message, /--file/)
    return true
  })
  await assert.rejects(image(loopdev, join(base, 'z.img'), { level: 'high' }), TypeError)
  for (const n of ['x.img.zst', 'y.img', 'z.img']) assert.equal(existsSync(join(base, n)), false)
})

test('image: an abort leaves no output under its name', async (t) => {
  if (skipped(t, 'image abort')) return
  const out = join(base, 'stopped.img.xz')
  const ac = new AbortController()
  await assert.rejects(
    image(loopdev, out, {
      level: 9,
      jobs: 1,
      signal: ac.signal,
      onProgress: (p) => { if (p.read > 0) ac.abort() },
    }),
    (e) => {
      assert.equal(e.name, 'AbortError')
      return true
    })
  assert.equal(existsSync(out), false)
  assert.deepEqual(readdirSync(base).filter((n) => n.startsWith('.kopiru-tmp')), [])
})
