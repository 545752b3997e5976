// The binding on Windows: run by the Windows build of Node under Wine
// (scripts/test/windows.sh), with the binding cross-built by mingw. Only
// what a plain directory on Wine's drives can show: copies, progress,
// refusals and their error codes, a failed file, AbortSignal and resume,
// verify. Of ../helpers.mjs only the portable helpers are used.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join, sep } from 'node:path'
import { copy, verify, probe } from 'kopiru'
import { scratch, writePattern } from '../helpers.mjs'

/** Relative name -> sha256 of every file under `dir` ('/'-joined names). */
function digests(dir, prefix = '', out = new Map()) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) {
      out.set(`${prefix}${e.name}/`, 'dir')
      digests(p, `${prefix}${e.name}/`, out)
    } else {
      out.set(prefix + e.name, createHash('sha256').update(readFileSync(p)).digest('hex'))
    }
  }
  return out
}

test('runs on Windows', () => {
  assert.equal(process.platform, 'win32')
})

// The record of copies (reruns merge) goes to %LOCALAPPDATA%: a scratch one.
process.env.LOCALAPPDATA = scratch()

test('a tree with spaces and non-ASCII names: an exact copy; a rerun copies nothing, -T updates it', async () => {
  const root = scratch()
  const src = join(root, 'src tree')
  for (const d of ['sub dir/deeper', 'empty dir', 'naïve café', '日本語']) mkdirSync(join(src, d), { recursive: true })
  writeFileSync(join(src, 'a.txt'), 'hello\n')
  writeFileSync(join(src, 'sub dir', 'deeper', 'ü ß.txt'), 'umlaut\n')
  writeFileSync(join(src, '日本語', 'ファイル.txt'), 'kana\n')
  writePattern(join(src, 'naïve café', 'big.bin'), 3 << 20, 5)
  for (let i = 0; i < 40; i++) writeFileSync(join(src, 'sub dir', `f${i}`), `file ${i}\n`)
  const dest = join(root, 'dest')
  const s = await copy(src, dest)
  assert.equal(s.exitCode, 0)
  assert.equal(s.files, 44)
  assert.equal(s.bytes, 6 + 7 + 5 + (3 << 20) + Array.from({ length: 40 }, (_, i) => `file ${i}\n`.length).reduce((a, b) => a + b))
  assert.deepEqual(s.errors, [])
  assert.deepEqual(digests(dest), digests(src))
  // The same command again onto the finished copy: neither nested as
  // dest/src tree (cp's rule) nor merged over the copy; a warning says
  // so. noTargetDirectory (-T) updates it from the source.
  writeFileSync(join(src, 'sub dir', 'added.txt'), 'new\n')
  const again = await copy(src, dest)
  assert.equal(again.exitCode, 0)
  assert.equal(existsSync(join(dest, 'src tree')), false)
  assert.equal(existsSync(join(dest, 'sub dir', 'added.txt')), false)
  assert.match(again.warnings[0].reason, /is the copy of/)
  const update = await copy(src, dest, { noTargetDirectory: true })
  assert.equal(update.exitCode, 0)
  assert.deepEqual(digests(dest), digests(src))
})

test('progress: counts only grow and end at the summary totals', async () => {
  const root = scratch()
  const src = join(root, 'src')
  mkdirSync(src)
  for (let i = 0; i < 200; i++) writeFileSync(join(src, `f${i}`), 'x'.repeat(1000 + i))
  writePattern(join(src, 'big'), 64 << 20, 9)
  const seen = []
  const s = await copy(src, join(root, 'dst'), { sync: 'file', onProgress: (p) => seen.push({ ...p }) })
  assert.ok(seen.length >= 1)
  for (let i = 1; i < seen.length; i++) {
    assert.ok(seen[i].files >= seen[i - 1].files, `files went down at ${i}`)
    assert.ok(seen[i].bytes >= seen[i - 1].bytes, `bytes went down at ${i}`)
  }
  assert.equal(seen.at(-1).phase, 'done')
  assert.equal(seen.at(-1).files, s.files)
  assert.equal(seen.at(-1).bytes, s.bytes)
  assert.equal(s.files, 201)
})

test('refusals carry Node-style codes: into itself, onto itself, a missing source', async () => {
  const root = scratch()
  const src = join(root, 'src')
  mkdirSync(src)
  writeFileSync(join(src, 'f'), 'x')
  const refused = (e) => {
    assert.equal(e.code, 'KOPIRU_REFUSED', e.stack)
    assert.equal(e.name, 'KopiruError')
    return true
  }
  await assert.rejects(copy(src, join(src, 'sub')), refused)
  assert.equal(existsSync(join(src, 'sub')), false)
  await assert.rejects(copy(join(src, 'f'), join(src, 'f')), (e) => refused(e) && /same file/.test(e.message))
  assert.equal(readFileSync(join(src, 'f'), 'utf8'), 'x')
  // A missing file (ERROR_FILE_NOT_FOUND, 2) and a missing parent
  // (ERROR_PATH_NOT_FOUND, 3) are both ENOENT, as fs says.
  for (const missing of [join(root, 'nope'), join(root, 'no', 'such', 'path')]) {
    await assert.rejects(copy(missing, join(root, 'out')), (e) => {
      refused(e)
      assert.equal(e.errors[0].code, 'ENOENT', JSON.stringify(e.errors))
      assert.ok([2, 3].includes(e.errno), `errno ${e.errno}`)
      assert.equal(e.errors[0].path, missing)
      return true
    })
  }
  assert.equal(existsSync(join(root, 'out')), false)
  const p = await probe(join(root, 'nope')).then(() => null, (e) => e)
  assert.ok(p, 'probe of a missing path rejects')
  assert.equal(p.code, 'KOPIRU_FAILED', p.stack)
  assert.equal(p.errors[0].code, 'ENOENT', JSON.stringify(p.errors))
})

test('one file that cannot be placed: KOPIRU_PARTIAL naming it, the rest copied', async () => {
  const root = scratch()
  const src = join(root, 'src')
  const dest = join(root, 'dst')
  mkdirSync(src)
  mkdirSync(join(dest, 'b'), { recursive: true })
  for (const f of ['a', 'b', 'c']) writeFileSync(join(src, f), `${f}\n`)
  writeFileSync(join(dest, 'b', 'inner'), 'kept\n')
  // SRC\. (path.join would drop the '.'): the contents of SRC into DEST.
  await assert.rejects(copy(`${src}${sep}.`, dest), (e) => {
    assert.equal(e.code, 'KOPIRU_PARTIAL', e.stack)
    assert.equal(e.summary.exitCode, 23)
    assert.equal(e.summary.files, 2)
    assert.equal(e.summary.errors.length, 1)
    assert.equal(e.summary.errors[0].path, join(dest, 'b'))
    return true
  })
  assert.equal(readFileSync(join(dest, 'a'), 'utf8'), 'a\n')
  assert.equal(readFileSync(join(dest, 'c'), 'utf8'), 'c\n')
  assert.equal(readFileSync(join(dest, 'b', 'inner'), 'utf8'), 'kept\n')
})

test('AbortSignal: already aborted, and in the middle of a large file; resume finishes', async () => {
  const root = scratch()
  const src = join(root, 'src')
  mkdirSync(src)
  writeFileSync(join(src, 'f'), 'x')
  const ac0 = new AbortController()
  ac0.abort()
  await assert.rejects(copy(src, join(root, 'never'), { signal: ac0.signal }), { name: 'AbortError' })
  assert.equal(existsSync(join(root, 'never')), false)

  const size = 768 << 20
  writePattern(join(src, 'big.bin'), size, 3)
  const dest = join(root, 'dst')
  const ac = new AbortController()
  let seen = 0
  const err = await copy(src, dest, {
    signal: ac.signal,
    onProgress: (p) => {
      seen = p.bytes
      if (p.bytes >= 16 << 20) ac.abort()
    },
  }).then(() => null, (e) => e)
  assert.ok(err, `rejected (bytes seen ${seen})`)
  assert.equal(err.name, 'AbortError', err.stack)
  assert.equal(err.summary.cancelled, true)
  assert.equal(err.summary.exitCode, 20)
  // Nothing under the final name: the new tree is staged until complete.
  assert.equal(existsSync(dest), false, `dest exists: ${existsSync(dest) && readdirSync(dest)}`)
  const s = await copy(src, dest, { resume: true })
  assert.equal(s.exitCode, 0)
  assert.equal(statSync(join(dest, 'big.bin')).size, size)
  assert.deepEqual(readdirSync(dest).sort(), ['big.bin', 'f'])
  const leftovers = readdirSync(root).filter((n) => !['src', 'dst'].includes(n))
  assert.deepEqual(leftovers, [], 'no staged tree left beside dst')
  const v = await verify(src, dest)
  assert.equal(v.equal, true, JSON.stringify(v))
})

test('verify: equal, then a difference found', async () => {
  const root = scratch()
  const a = join(root, 'a')
  mkdirSync(join(a, 'd'), { recursive: true })
  for (let i = 0; i < 6; i++) writeFileSync(join(a, 'd', `f${i}`), `content ${i}\n`)
  const b = join(root, 'b')
  await copy(a, b, { sync: 'none' })
  assert.equal((await verify(a, b)).equal, true)
  writeFileSync(join(b, 'd', 'f3'), 'CONTENT 3\n')
  const r = await verify(a, b)
  assert.equal(r.equal, false)
  assert.equal(r.exitCode, 1)
  assert.deepEqual(r.differences.map((d) => [d.path, d.what]), [[join('d', 'f3'), 'content differs']])
})
