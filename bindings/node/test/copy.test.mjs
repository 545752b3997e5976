// copy(): clones on XFS, the fallback on ext4, progress, refusals, a
// partial copy, option checking.
import { test, before } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync, chmodSync, chownSync, readlinkSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { copy, verify, probe } from 'kopiru'
import { isRoot, cannotMount, mountFresh, skipUnless, makeTree, writePattern, scratch, sh, have } from './helpers.mjs'

// The record of copies (reruns merge) is the command's
// ($XDG_STATE_HOME/kopiru/copies): a scratch one for every test here.
process.env.XDG_STATE_HOME = scratch()

let xfs = null
let ext4 = null
before(() => {
  if (!cannotMount('xfs')) xfs = mountFresh('xfs', 400)
  if (!cannotMount('ext4')) ext4 = mountFresh('ext4', 768)
})

test('XFS: files are cloned (filefrag shows shared extents)', async (t) => {
  if (skipUnless(t, 'xfs')) return
  if (!have('filefrag')) return t.skip('SKIPPED: filefrag is not installed (e2fsprogs)')
  const src = join(xfs, 'clone-src')
  mkdirSync(src)
  const made = makeTree(src, { files: 12, size: 256 << 10 })
  const s = await copy(src, join(xfs, 'clone-dst'))
  assert.equal(s.files, made.files)
  assert.equal(s.bytes, made.bytes)
  assert.equal(s.errors.length, 0)
  assert.equal(s.exitCode, 0)
  assert.ok(s.methods.clone > 0, `some files cloned: ${JSON.stringify(s.methods)}`)
  const frag = sh('filefrag', ['-v', join(xfs, 'clone-dst', 'a', 'f1.bin')])
  assert.match(frag, /shared/, `filefrag -v of a clone:\n${frag}`)
  assert.equal(readlinkSync(join(xfs, 'clone-dst', 'a', 'link')), 'note.txt')
  const v = await verify(src, join(xfs, 'clone-dst'))
  assert.equal(v.equal, true, JSON.stringify(v))
  const p = await probe(xfs)
  assert.equal(p.paths[0].filesystem, 'xfs')
  assert.equal(p.clone.works, true)
})

test('ext4: no clone, the in-kernel copy instead; method "clone" is refused', async (t) => {
  if (skipUnless(t, 'ext4')) return
  const src = join(ext4, 'fb-src')
  mkdirSync(src)
  const made = makeTree(src, { files: 10 })
  const s = await copy([src], join(ext4, 'fb-dst'))
  assert.equal(s.files, made.files)
  assert.equal(s.methods.clone, 0)
  assert.ok(s.methods.offload + s.methods.stream === s.files, JSON.stringify(s.methods))
  assert.ok(s.methods.offload > 0, JSON.stringify(s.methods))
  // A local disk: no round trips, so no steps and no server-side copies.
  assert.equal(s.roundTripFilesystem, null)
  assert.deepEqual(s.workerSteps, [])
  assert.equal(s.serverSideFiles, 0)
  assert.ok(s.workers >= 1, `workers ${s.workers}`)
  assert.equal((await verify(src, join(ext4, 'fb-dst'))).equal, true)
  const p = await probe(ext4)
  assert.equal(p.paths[0].filesystem, 'ext4')
  assert.equal(p.clone.works, false)
  await assert.rejects(copy(src, join(ext4, 'fb-clone'), { method: 'clone' }), (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED')
    assert.match(e.message, /cannot clone/)
    return true
  })
  assert.equal(existsSync(join(ext4, 'fb-clone')), false)
})

test('progress: counts only grow and end at the summary totals', async (t) => {
  const root = ext4 ?? scratch()
  const src = join(root, 'prog-src')
  mkdirSync(src)
  for (let d = 0; d < 20; d++) {
    mkdirSync(join(src, `d${d}`))
    for (let f = 0; f < 50; f++) writePattern(join(src, `d${d}`, `f${f}`), 4096 + f * 100, d * 100 + f)
  }
  writePattern(join(src, 'big'), 200 << 20, 7)
  const seen = []
  const s = await copy(src, join(root, 'prog-dst'), {
    method: 'stream',
    // Every file fsynced with its directory: slow enough (seconds, even on
    // a quiet machine) for several progress calls in flight.
    sync: 'file',
    onProgress: (p) => seen.push({ ...p, at: performance.now() }),
  })
  assert.ok(seen.length >= 3, `progress calls: ${seen.length}`)
  for (let i = 1; i < seen.length; i++) {
    assert.ok(seen[i].files >= seen[i - 1].files, `files went down at ${i}: ${JSON.stringify(seen)}`)
    assert.ok(seen[i].bytes >= seen[i - 1].bytes, `bytes went down at ${i}`)
  }
  const last = seen.at(-1)
  assert.equal(last.phase, 'done')
  assert.equal(last.files, s.files)
  assert.equal(last.bytes, s.bytes)
  assert.equal(s.files, 1001)
  // At most ~10 a second: the in-flight calls are >= ~100 ms apart.
  const inflight = seen.slice(0, -1)
  for (let i = 1; i < inflight.length; i++) {
    assert.ok(inflight[i].at - inflight[i - 1].at >= 85, `calls ${i - 1} and ${i} ${inflight[i].at - inflight[i - 1].at} ms apart`)
  }
  console.log(`progress: ${seen.length} calls over ${(s.elapsedSeconds * 1000).toFixed(0)} ms`)
})

test('refusals: into itself, onto itself, missing source', async () => {
  const root = scratch()
  const src = join(root, 'src')
  mkdirSync(src)
  writeFileSync(join(src, 'f'), 'x')
  const refused = (what) => (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED', `${what}: ${e.stack}`)
    assert.equal(e.name, 'KopiruError')
    assert.ok(e.errors.length >= 1)
    return true
  }
  await assert.rejects(copy(src, join(src, 'sub')), (e) => {
    refused('into itself')(e)
    // The refusal's stable name, whatever its words.
    assert.equal(e.refusal, 'into-itself')
    return true
  })
  assert.equal(existsSync(join(src, 'sub')), false)
  await assert.rejects(copy(join(src, 'f'), join(src, 'f')), (e) => {
    refused('onto itself')(e)
    assert.match(e.message, /same file/)
    assert.equal(e.errors[0].refusal, 'same-file')
    return true
  })
  assert.equal(readFileSync(join(src, 'f'), 'utf8'), 'x')
  await assert.rejects(copy(join(root, 'nope'), join(root, 'out')), (e) => {
    refused('missing')(e)
    assert.equal(e.errors[0].code, 'ENOENT')
    assert.equal(e.errno, 2)
    assert.equal(e.refusal, null)
    return true
  })
  assert.equal(existsSync(join(root, 'out')), false)
  // Several sources into something that is not a directory.
  await assert.rejects(copy([src, src], join(src, 'f')), (e) => {
    refused('not a directory')(e)
    assert.equal(e.refusal, 'not-a-directory')
    return true
  })
  // The engine's refusal in this API's words: its option's name, not the
  // command line's -T.
  await assert.rejects(copy([src, src], join(root, 'both'), { noTargetDirectory: true }), (e) => {
    refused('one source')(e)
    assert.equal(e.refusal, 'one-source-as-itself')
    assert.match(e.message, /noTargetDirectory takes one source/)
    assert.doesNotMatch(e.message, /-T/)
    return true
  })
})

test('the same copy run again onto the tree it made copies nothing, as the command does', async () => {
  const root = scratch()
  const src = join(root, 'src')
  mkdirSync(join(src, 'd'), { recursive: true })
  writeFileSync(join(src, 'd', 'f'), 'one\n')
  const dest = join(root, 'dest')
  await copy(src, dest)
  writeFileSync(join(src, 'g'), 'two\n')
  writeFileSync(join(dest, 'd', 'f'), 'edited\n')
  const again = await copy(src, dest)
  assert.equal(again.exitCode, 0)
  // Neither dest/src (cp's rule once dest exists) nor a merge over what
  // was edited in the finished copy: nothing copied, and a warning says so.
  assert.equal(existsSync(join(dest, 'src')), false)
  assert.equal(existsSync(join(dest, 'g')), false)
  assert.equal(readFileSync(join(dest, 'd', 'f'), 'utf8'), 'edited\n')
  assert.match(again.warnings[0].reason, /is the copy of/)
  // noTargetDirectory (-T) updates it from the source.
  await copy(src, dest, { noTargetDirectory: true })
  assert.equal(readFileSync(join(dest, 'g'), 'utf8'), 'two\n')
  assert.equal(readFileSync(join(dest, 'd', 'f'), 'utf8'), 'one\n')
  // A directory kopiru did not make still follows cp's rule: into it.
  const other = join(root, 'other')
  mkdirSync(other)
  await copy(src, other)
  assert.equal(readFileSync(join(other, 'src', 'g'), 'utf8'), 'two\n')
})

test('options are checked before anything starts', async () => {
  const root = scratch()
  await assert.rejects(copy(root, join(root, 'x'), { method: 'fast' }), { name: 'TypeError' })
  await assert.rejects(copy(root, join(root, 'x'), { noclobber: true }), /unknown option 'noclobber'/)
  await assert.rejects(copy(root, join(root, 'x'), { preserve: ['colour'] }), /unknown preserve item/)
  await assert.rejects(copy(42, join(root, 'x')), { code: 'ERR_INVALID_ARG_TYPE' })
  await assert.rejects(copy([], join(root, 'x')), { code: 'ERR_INVALID_ARG_VALUE' })
})

test('one unreadable file: KOPIRU_PARTIAL, the rest copied and kept staged', async (t) => {
  const root = scratch()
  const src = join(root, 'src')
  mkdirSync(join(src, 'd'), { recursive: true })
  for (let i = 0; i < 5; i++) writeFileSync(join(src, 'd', `ok${i}`), `ok ${i}\n`)
  writeFileSync(join(src, 'd', 'secret'), 'no\n')
  chmodSync(join(src, 'd', 'secret'), 0o000)
  const dest = join(root, 'dst')
  if (!isRoot) {
    await assert.rejects(copy(src, dest), (e) => {
      assert.equal(e.code, 'KOPIRU_PARTIAL')
      assert.equal(e.summary.files, 5)
      assert.equal(e.summary.errors.length, 2)
      assert.equal(e.summary.errors[0].code, 'EACCES')
      assert.match(e.summary.errors[1].reason, /^not put in place/)
      return true
    })
  } else {
    // Root reads anything: the copy runs in a child process as nobody
    // (uid 65534), for whom mode 000 means unreadable. The child imports
    // this same installed package, which nobody must be able to read.
    const entry = import.meta.resolve('kopiru')
    const probeRun = spawnSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(entry)})`], {
      uid: 65534, gid: 65534, encoding: 'utf8',
    })
    if (probeRun.status !== 0) {
      const why = `the package at ${entry} cannot be loaded as uid 65534 (${probeRun.stderr.trim().split('\n').at(-1)}); run the packed tests (scripts/test-packed.sh)`
      console.log(`!!! SKIPPED ${t.name}: ${why}`)
      return t.skip(`SKIPPED: ${why}`)
    }
    chownSync(root, 65534, 65534)
    chmodSync(root, 0o755)
    spawnSync('chown', ['-R', '65534:65534', src])
    const script = `
      const { copy } = await import(${JSON.stringify(entry)})
      try { await copy(${JSON.stringify(src)}, ${JSON.stringify(dest)}); console.log(JSON.stringify({ resolved: true })) }
      catch (e) { console.log(JSON.stringify({ code: e.code, summary: e.summary, message: e.message })) }`
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      uid: 65534, gid: 65534, encoding: 'utf8',
    })
    assert.equal(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1))
    assert.equal(out.code, 'KOPIRU_PARTIAL', JSON.stringify(out))
    assert.equal(out.summary.files, 5)
    assert.equal(out.summary.exitCode, 23)
    assert.equal(out.summary.errors.length, 2)
    assert.equal(out.summary.errors[0].code, 'EACCES')
    assert.equal(out.summary.errors[0].path, join(src, 'd', 'secret'))
    assert.equal(out.summary.errors[1].path, dest)
    assert.match(out.summary.errors[1].reason, /^not put in place/)
    assert.match(out.message, /KOPIRU|failed/)
  }
  // A new tree with a failure in it is not put in place: it is kept under
  // its staged name beside it, the rest copied there.
  assert.equal(existsSync(dest), false)
  const staged = readdirSync(root).find((n) => n.startsWith('.kopiru-tmp.tree.'))
  assert.ok(staged, 'no staged tree kept')
  for (let i = 0; i < 5; i++) assert.equal(readFileSync(join(root, staged, 'd', `ok${i}`), 'utf8'), `ok ${i}\n`)
  assert.equal(existsSync(join(root, staged, 'd', 'secret')), false)
  assert.ok(statSync(join(root, staged, 'd')).isDirectory())
})

test('verify: equal, a difference, and an abort', async () => {
  const root = scratch()
  const a = join(root, 'a')
  mkdirSync(a)
  makeTree(a, { files: 6, size: 4096 })
  const b = join(root, 'b')
  await copy(a, b, { sync: 'none' })
  assert.equal((await verify(a, b)).equal, true)
  writeFileSync(join(b, 'a', 'note.txt'), 'HELLO\n')
  const r = await verify(a, b)
  assert.equal(r.equal, false)
  assert.equal(r.exitCode, 1)
  assert.deepEqual(r.differences.map((d) => [d.path, d.what]), [['a/note.txt', 'content differs']])
  assert.equal(r.differences[0].destPath, join(b, 'a', 'note.txt'))
  const ac = new AbortController()
  const run = verify(a, b, { signal: ac.signal })
  ac.abort()
  await assert.rejects(run, { name: 'AbortError' })
})
