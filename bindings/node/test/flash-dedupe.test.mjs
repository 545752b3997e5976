// flash(): a .zst image onto a loop device, read back and compared; the
// command's refusals. dedupe(): a dry run on XFS.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, openSync, readSync, closeSync, copyFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { flash, dedupe } from 'kopiru'
import { loopDeviceMissing, cannotMount, mountFresh, skipUnless, writePattern, scratch, sh } from './helpers.mjs'

let loopdev = null
let why = null
let base = null
before(() => {
  why = loopDeviceMissing()
  if (why) return
  base = scratch()
  sh('truncate', ['-s', '64M', join(base, 'disk.img')])
  loopdev = sh('losetup', ['-f', '--show', join(base, 'disk.img')]).trim()
})
after(() => {
  if (loopdev) sh('losetup', ['-d', loopdev])
})

function sha(path, len) {
  const h = createHash('sha256')
  const fd = openSync(path, 'r')
  const buf = Buffer.alloc(1 << 20)
  try {
    for (let off = 0; off < len;) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, len - off), off)
      if (n === 0) break
      h.update(buf.subarray(0, n))
      off += n
    }
  } finally {
    closeSync(fd)
  }
  return h.digest('hex')
}

test('flash: a .zst image onto a loop device, verified', async (t) => {
  if (why) {
    console.log(`!!! SKIPPED flash: ${why}`)
    return t.skip(`SKIPPED: ${why}`)
  }
  const raw = join(base, 'image.raw')
  const size = 40 << 20
  writePattern(raw, size, 11)
  sh('zstd', ['-q', '-f', raw, '-o', `${raw}.zst`])
  const seen = []
  const r = await flash(`${raw}.zst`, [loopdev], { onProgress: (p) => seen.push(p) })
  assert.equal(r.format, 'zstd')
  assert.equal(r.imageBytes, size)
  assert.equal(r.exitCode, 0)
  assert.equal(r.devices.length, 1)
  assert.equal(r.devices[0].verified, true)
  assert.equal(r.devices[0].error, null)
  assert.deepEqual(r.errors, [])
  assert.equal(sha(loopdev, size), sha(raw, size))
  const last = seen.at(-1)
  assert.equal(last.phase, 'done')
  assert.equal(last.written, size)
  assert.equal(last.verified, size)
  for (let i = 1; i < seen.length; i++) {
    assert.ok(seen[i].written >= seen[i - 1].written)
    assert.ok(seen[i].verified >= seen[i - 1].verified)
  }
})

test('flash: the command\'s refusals, nothing written', async (t) => {
  if (why) {
    console.log(`!!! SKIPPED flash refusals: ${why}`)
    return t.skip(`SKIPPED: ${why}`)
  }
  const img = join(base, 'small.raw')
  writePattern(img, 1 << 20, 5)
  // A regular file without allowFile.
  const file = join(base, 'target.bin')
  writeFileSync(file, 'keep')
  await assert.rejects(flash(img, [file]), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /not a block device/)
    // In this API's words: its option, not the command line's --file.
    assert.match(e.message, /allowFile: true writes a regular file/)
    assert.doesNotMatch(e.message, /--file/)
    assert.equal(e.refusal, 'not-a-block-device')
    return true
  })
  assert.equal(readFileSync(file, 'utf8'), 'keep')
  // A device that does not exist.
  await assert.rejects(flash(img, ['/dev/kopiru-no-such-device']), { code: 'KOPIRU_REFUSED' })
  // Too small: a 64 MiB device, a 100 MiB raw image.
  const big = join(base, 'big.raw')
  sh('truncate', ['-s', '100M', big])
  await assert.rejects(flash(big, [loopdev]), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /too small/)
    return true
  })
  // Mounted: a mounted loop filesystem's device.
  if (!cannotMount('ext4')) {
    const mnt = mountFresh('ext4', 64)
    const dev = sh('findmnt', ['-n', '-o', 'SOURCE', mnt]).trim()
    await assert.rejects(flash(img, [dev]), (e) => {
      assert.equal(e.code, 'KOPIRU_REFUSED')
      assert.match(e.message, /mounted/)
      assert.match(e.message, /or force: true/)
      assert.doesNotMatch(e.message, /--force/)
      return true
    })
  }
})

test('flash: an image is known by its bytes, not its name', async (t) => {
  if (why) {
    console.log(`!!! SKIPPED flash formats: ${why}`)
    return t.skip(`SKIPPED: ${why}`)
  }
  const size = 1 << 20
  writePattern(loopdev, size, 3)
  const before = sha(loopdev, size)
  // A web page saved under an image's name.
  const page = join(base, 'page.img.xz')
  writeFileSync(page, '<!DOCTYPE html><html><body>404 Not Found</body></html>\n'.repeat(20))
  await assert.rejects(flash(page, [loopdev]), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /HTML/)
    return true
  })
  // gzip bytes, with format: 'zstd' required.
  const img = join(base, 'pattern.img')
  writePattern(img, size, 7)
  sh('gzip', ['-k', '-f', img])
  await assert.rejects(flash(`${img}.gz`, [loopdev], { format: 'zstd' }), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /its bytes are not zstd/)
    assert.match(e.message, /format: 'zstd' was given/)
    assert.doesNotMatch(e.message, /--format/)
    return true
  })
  assert.equal(sha(loopdev, size), before, 'the device was written')
  // A format name it does not know is a TypeError, before anything runs.
  await assert.rejects(flash(img, [loopdev], { format: 'rar' }), TypeError)
  // Bytes with no signature under a name that says nothing: written with
  // format: 'raw'.
  const blob = join(base, 'pattern.download')
  copyFileSync(img, blob)
  await assert.rejects(flash(blob, [loopdev]), { code: 'KOPIRU_REFUSED' })
  const r = await flash(blob, [loopdev], { format: 'raw' })
  assert.equal(r.exitCode, 0)
  assert.equal(r.format, 'raw')
  assert.equal(sha(loopdev, size), sha(img, size))
})

test('dedupe: a dry run on XFS finds identical files and changes nothing', async (t) => {
  if (skipUnless(t, 'xfs')) return
  const xfs = mountFresh('xfs', 320)
  const dir = join(xfs, 'dd')
  mkdirSync(dir)
  writePattern(join(dir, 'a'), 2 << 20, 1)
  writePattern(join(dir, 'b'), 2 << 20, 1) // the same bytes, not a clone
  writePattern(join(dir, 'c'), 2 << 20, 1)
  writePattern(join(dir, 'other'), 2 << 20, 2)
  assert.doesNotMatch(sh('filefrag', ['-v', join(dir, 'b')]), /shared/)
  const seen = []
  const r = await dedupe([dir], { dryRun: true, onProgress: (p) => seen.push(p) })
  assert.equal(r.dryRun, true)
  assert.equal(r.filesScanned, 4)
  assert.equal(r.groups, 1)
  assert.equal(r.filesShared, 2)
  assert.equal(r.bytesShared, 4 << 20)
  assert.equal(r.spaceFreed, 0)
  assert.equal(r.exitCode, 0)
  assert.deepEqual(r.errors, [])
  assert.doesNotMatch(sh('filefrag', ['-v', join(dir, 'b')]), /shared/, 'a dry run shares nothing')
  assert.equal(seen.at(-1).bytes, r.bytesHashed)
  // And for real.
  const real = await dedupe([dir])
  assert.equal(real.filesShared, 2)
  assert.match(sh('filefrag', ['-v', join(dir, 'b')]), /shared/)
})
