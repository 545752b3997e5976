// flash(url): an .xz image from an HTTP server on 127.0.0.1 (in this
// process) that cuts the first answer at 40%: the engine resumes with Range
// and the device ends byte-exact. A 404 is refused; a wrong sha256 fails
// with the device's first MiB unchanged.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { createServer } from 'node:http'
import { readFileSync, openSync, readSync, closeSync } from 'node:fs'
import { join } from 'node:path'
import { flash } from 'kopiru'
import { loopDeviceMissing, have, writePattern, scratch, sh } from './helpers.mjs'

let loopdev = null
let why = null
let base = null
let server = null
let port = 0
const requests = []

before(async () => {
  why = loopDeviceMissing() || (have('xz') ? null : 'xz not installed')
  if (why) return
  base = scratch()
  sh('truncate', ['-s', '16M', join(base, 'disk.img')])
  loopdev = sh('losetup', ['-f', '--show', join(base, 'disk.img')]).trim()
  const raw = join(base, 'image.raw')
  writePattern(raw, (5 << 20) + 77, 3)
  // An MBR signature: a raw image's start.
  sh('sh', ['-c', `printf '\\125\\252' | dd of=${raw} bs=1 seek=510 conv=notrunc status=none`])
  sh('xz', ['-k', '-f', '-q', '-T1', '-0', raw])
  const body = readFileSync(`${raw}.xz`)
  const etag = '"v1"'
  server = createServer((req, res) => {
    requests.push(`${req.url} ${req.headers.range ?? '-'}`)
    if (req.url !== '/image.raw.xz') {
      res.writeHead(404, { 'Content-Length': 0 })
      return res.end()
    }
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '')
    if (range && req.headers['if-range'] === etag) {
      const start = Number(range[1])
      const end = range[2] ? Number(range[2]) : body.length - 1
      res.writeHead(206, {
        'Content-Length': end - start + 1,
        'Content-Range': `bytes ${start}-${end}/${body.length}`,
        ETag: etag,
      })
      return res.end(body.subarray(start, end + 1))
    }
    res.writeHead(200, { 'Content-Length': body.length, ETag: etag })
    const whole = requests.filter((r) => r.endsWith(' -')).length
    if (whole === 1) {
      // The first whole answer stops at 40%: the connection is cut.
      res.write(body.subarray(0, Math.floor(body.length * 0.4)), () => res.socket.destroy())
    } else {
      res.end(body)
    }
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = server.address().port
})

after(() => {
  if (server) server.close()
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

test('flash(url): resumed after a cut connection, byte-exact', async (t) => {
  if (why) {
    console.log(`!!! SKIPPED flash(url): ${why}`)
    return t.skip(`SKIPPED: ${why}`)
  }
  const size = (5 << 20) + 77
  const seen = []
  const r = await flash(new URL(`http://127.0.0.1:${port}/image.raw.xz`), [loopdev], {
    stallTimeout: 2,
    onProgress: (p) => seen.push(p),
  })
  assert.equal(r.format, 'xz')
  // The download's counters: the .xz file had once, the cut resumed.
  const xzSize = readFileSync(join(base, 'image.raw.xz')).length
  assert.equal(r.downloadedBytes, xzSize)
  assert.ok(r.resumes >= 1, `resumes: ${r.resumes}`)
  const last = seen[seen.length - 1]
  assert.equal(last.phase, 'done')
  assert.equal(last.downloaded, xzSize)
  assert.ok(last.resumes >= 1, JSON.stringify(last))
  for (const p of seen) {
    if (p.downloadTotal !== null) assert.equal(p.downloadTotal, xzSize)
  }
  assert.equal(r.imageBytes, size)
  assert.equal(r.exitCode, 0)
  assert.equal(r.devices[0].verified, true)
  assert.equal(sha(loopdev, size), sha(join(base, 'image.raw'), size))
  assert.ok(requests.some((q) => /^\/image\.raw\.xz bytes=[1-9]\d*-$/.test(q)), requests.join('\n'))
})

test('flash(url): a 404 is refused; a wrong sha256 leaves the first MiB', async (t) => {
  if (why) {
    console.log(`!!! SKIPPED flash(url) refusals: ${why}`)
    return t.skip(`SKIPPED: ${why}`)
  }
  await assert.rejects(flash(`http://127.0.0.1:${port}/missing.img.xz`, [loopdev]), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /HTTP 404/)
    return true
  })
  sh('dd', ['if=/dev/urandom', `of=${loopdev}`, 'bs=1M', 'count=1', 'oflag=direct', 'status=none'])
  const head = sha(loopdev, 1 << 20)
  await assert.rejects(
    flash(`http://127.0.0.1:${port}/image.raw.xz`, [loopdev], { sha256: 'ab'.repeat(32) }),
    (e) => {
      assert.match(e.message, /SHA-256/)
      return true
    },
  )
  assert.equal(sha(loopdev, 1 << 20), head)
})
