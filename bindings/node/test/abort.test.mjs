// AbortSignal: a 2 GiB file and a 50,000-file tree stopped in the middle,
// quickly, with nothing half-written under a final name, then finished
// with resume: true. And the event loop stays responsive meanwhile.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readdirSync, writeFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { copy, verify } from 'kopiru'
import { cannotMount, mountFresh, skipUnless, writePattern, scratch, sh } from './helpers.mjs'

let ext4 = null
before(() => {
  if (!cannotMount('ext4')) ext4 = mountFresh('ext4', 6144)
})

/** Every name under `dir` (relative), recursively. */
function names(dir, prefix = '') {
  const out = []
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    out.push(prefix + e.name)
    if (e.isDirectory()) out.push(...names(join(dir, e.name), `${prefix}${e.name}/`))
  }
  return out
}

test('an already aborted signal rejects before anything starts', async () => {
  const root = scratch()
  writeFileSync(join(root, 'f'), 'x')
  const ac = new AbortController()
  ac.abort(new Error('not now'))
  await assert.rejects(copy(join(root, 'f'), join(root, 'g'), { signal: ac.signal }), (e) => {
    assert.equal(e.name, 'AbortError')
    assert.equal(e.code, 'ABORT_ERR')
    assert.equal(e.cause.message, 'not now')
    return true
  })
  assert.equal(existsSync(join(root, 'g')), false)
})

test('abort in the middle of a 2 GiB file: rejects within ~100-500 ms, no partial final name, resume completes', async (t) => {
  if (skipUnless(t, 'ext4')) return
  const src = join(ext4, 'big-src')
  mkdirSync(src)
  const size = 2 * 1024 ** 3
  writePattern(join(src, 'big.bin'), size, 3)
  // The test's own writes flushed now, not in the copy's final flush.
  sh('sync', ['-f', src])
  const dest = join(ext4, 'big-dst')
  const ac = new AbortController()
  let abortedAt = 0
  let seen = 0
  // The stream method through a buffer (ext4 cannot clone; the in-kernel
  // copy would do as well): abort once a few hundred MiB are across.
  const run = copy(src, dest, {
    method: 'stream',
    signal: ac.signal,
    onProgress: (p) => {
      seen = p.bytes
      if (!abortedAt && p.bytes >= 64 << 20) {
        abortedAt = performance.now()
        ac.abort()
      }
    },
  })
  const err = await run.then(() => null, (e) => e)
  const took = performance.now() - abortedAt
  assert.ok(abortedAt > 0, `aborted in flight (bytes seen ${seen})`)
  assert.ok(err, 'rejected')
  assert.equal(err.name, 'AbortError', err.stack)
  assert.equal(err.summary.cancelled, true)
  assert.equal(err.summary.exitCode, 20)
  console.log(`2 GiB: aborted after ${seen} bytes; rejected ${took.toFixed(0)} ms after abort()`)
  assert.ok(took < 500, `rejected ${took.toFixed(0)} ms after abort()`)
  // Nothing under the final name: no big.bin (a temporary name at most).
  const left = existsSync(dest) ? names(dest) : []
  assert.ok(!left.includes('big.bin'), `left: ${left}`)
  // The rest, with the event loop's delay measured meanwhile: the copy
  // runs on the binding's threads, the loop only gets progress calls.
  const delay = monitorEventLoopDelay({ resolution: 5 })
  delay.enable()
  const s = await copy(src, dest, { resume: true, onProgress: () => {} })
  delay.disable()
  const p99 = delay.percentile(99) / 1e6
  console.log(`2 GiB resume: ${s.elapsedSeconds.toFixed(2)} s; event loop delay p99 ${p99.toFixed(1)} ms, max ${(delay.max / 1e6).toFixed(1)} ms`)
  assert.ok(p99 < 50, `event loop delay p99 ${p99} ms`)
  assert.equal(s.files, 1)
  assert.equal(statSync(join(dest, 'big.bin')).size, size)
  assert.deepEqual(names(dest), ['big.bin'])
  const v = await verify(src, dest)
  assert.equal(v.equal, true, JSON.stringify(v))
})

test('abort in the middle of a 50,000-file tree: no partial final names, resume completes', async (t) => {
  if (skipUnless(t, 'ext4')) return
  const src = join(ext4, 'tree-src')
  const n = 50_000
  for (let d = 0; d < 100; d++) {
    const dir = join(src, `d${String(d).padStart(3, '0')}`)
    mkdirSync(dir, { recursive: true })
    for (let f = 0; f < n / 100; f++) writeFileSync(join(dir, `f${f}`), `file ${d}/${f}\n`.repeat(1 + (f % 7)))
  }
  sh('sync', ['-f', src])
  const dest = join(ext4, 'tree-dst')
  const ac = new AbortController()
  let abortedAt = 0
  let filesAtAbort = 0
  const err = await copy(src, dest, {
    signal: ac.signal,
    jobs: 2,
    onProgress: (p) => {
      if (!abortedAt && p.files >= 2000) {
        filesAtAbort = p.files
        abortedAt = performance.now()
        ac.abort()
      }
    },
  }).then(() => null, (e) => e)
  const took = performance.now() - abortedAt
  assert.ok(abortedAt > 0, 'aborted in flight')
  assert.ok(err, 'rejected')
  assert.equal(err.name, 'AbortError')
  assert.ok(err.summary.files < n, `stopped early: ${err.summary.files} files`)
  console.log(`50k tree: aborted at ${filesAtAbort} files, stopped at ${err.summary.files}; rejected ${took.toFixed(0)} ms after abort()`)
  assert.ok(took < 1000, `rejected ${took.toFixed(0)} ms after abort()`)
  // Nothing half-made under a final name: with --sync end the tree is
  // staged and nothing at all is in place yet; whatever is there must be
  // complete (verify finds no content or size difference).
  if (existsSync(dest)) {
    const v = await verify(src, dest, { ignoreExtra: true })
    const bad = v.differences.filter((d) => d.what !== 'missing in destination')
    assert.deepEqual(bad, [])
  }
  const s = await copy(src, dest, { resume: true })
  assert.equal(s.files + s.skipped >= n, true, JSON.stringify({ files: s.files, skipped: s.skipped }))
  const v = await verify(src, dest)
  assert.equal(v.equal, true, JSON.stringify(v.differences.slice(0, 5)))
  assert.equal(v.files, n)
})
