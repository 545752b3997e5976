// The binding and the command line agree by construction (issue 28): for
// the same failure, `kopiru ... --json` and the binding's summary are the
// same object (keys in camelCase), and the command's exit status is the
// summary's exitCode. The command is the one built from this checkout
// (KOPIRU_CLI, set by scripts/test-packed.sh).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { copy, verify, choices } from 'kopiru'
import { scratch } from './helpers.mjs'

process.env.XDG_STATE_HOME = scratch()
const cli = process.env.KOPIRU_CLI

function cannotRunCli() {
  if (!cli) return 'KOPIRU_CLI is not set (scripts/test-packed.sh sets it to the built kopiru)'
  if (!existsSync(cli)) return `KOPIRU_CLI=${cli} does not exist`
  return null
}

function camel(v) {
  if (Array.isArray(v)) return v.map(camel)
  if (v === null || typeof v !== 'object') return v
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [
    k.replace(/_(.)/g, (_, c) => c.toUpperCase()),
    k === 'methods' ? x : camel(x),
  ]))
}

/** Without the wall time, and without the one field only Node has: each
 * error's `code` (its errno's name, as Node's fs gives it). */
function comparable(o) {
  const strip = (v) => {
    if (Array.isArray(v)) return v.map(strip)
    if (v === null || typeof v !== 'object') return v
    const c = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, strip(x)]))
    if ('side' in c && 'operation' in c) delete c.code
    return c
  }
  const c = strip(o)
  delete c.elapsedSeconds
  return c
}

/** The command's --json output (in camelCase) and its exit status. */
function run(args) {
  const r = spawnSync(cli, [...args, '--json'], { encoding: 'utf8' })
  assert.notEqual(r.stdout.trim(), '', `no JSON from kopiru ${args.join(' ')}: ${r.stderr}`)
  return { status: r.status, json: camel(JSON.parse(r.stdout.trim().split('\n').at(-1))) }
}

async function summaryOf(p) {
  try {
    return await p
  } catch (e) {
    assert.ok(e.summary, `rejected without a summary: ${e.stack}`)
    return e.summary
  }
}

function agree(cliRun, summary) {
  assert.equal(cliRun.status, summary.exitCode, `exit status ${cliRun.status}, binding's exitCode ${summary.exitCode}`)
  assert.deepEqual(comparable(cliRun.json), comparable(summary))
}

test('copy: a partial copy (a directory where a file goes) and a missing source', async (t) => {
  const why = cannotRunCli()
  if (why) { console.log(`!!! SKIPPED ${t.name}: ${why}`); return t.skip(`SKIPPED: ${why}`) }
  // The same tree twice, one for each; paths are compared relative to
  // their roots.
  const roots = {}
  for (const side of ['cli', 'node']) {
    const root = scratch()
    mkdirSync(join(root, 'src', 'd'), { recursive: true })
    writeFileSync(join(root, 'src', 'd', 'f'), 'f\n')
    writeFileSync(join(root, 'src', 'd', 'g'), 'g\n')
    mkdirSync(join(root, 'dst', 'd', 'f'), { recursive: true })
    writeFileSync(join(root, 'dst', 'd', 'f', 'keep'), 'mine\n')
    roots[side] = root
  }
  const rel = (o, root) => JSON.parse(JSON.stringify(o).replaceAll(root, '<root>'))
  const a = run(['copy', '-T', join(roots.cli, 'src'), join(roots.cli, 'dst')])
  const b = await summaryOf(copy(join(roots.node, 'src'), join(roots.node, 'dst'), { noTargetDirectory: true }))
  assert.equal(a.status, 23)
  agree({ status: a.status, json: rel(a.json, roots.cli) }, rel(b, roots.node))

  const root = scratch()
  const c = run(['copy', join(root, 'missing'), join(root, 'out')])
  const d = await summaryOf(copy(join(root, 'missing'), join(root, 'out')))
  assert.equal(c.status, 1)
  agree(c, d)
})

test('verify: differences, and equal trees', async (t) => {
  const why = cannotRunCli()
  if (why) { console.log(`!!! SKIPPED ${t.name}: ${why}`); return t.skip(`SKIPPED: ${why}`) }
  const root = scratch()
  mkdirSync(join(root, 'a', 'd'), { recursive: true })
  mkdirSync(join(root, 'b', 'd'), { recursive: true })
  writeFileSync(join(root, 'a', 'd', 'f'), 'one\n')
  writeFileSync(join(root, 'b', 'd', 'f'), 'two\n')
  writeFileSync(join(root, 'a', 'only'), 'x\n')
  const a = run(['verify', join(root, 'a'), join(root, 'b')])
  const b = await verify(join(root, 'a'), join(root, 'b'))
  assert.equal(a.status, 1)
  agree(a, b)
  writeFileSync(join(root, 'b', 'd', 'f'), 'one\n')
  writeFileSync(join(root, 'b', 'only'), 'x\n')
  const c = run(['verify', join(root, 'a'), join(root, 'b')])
  const d = await verify(join(root, 'a'), join(root, 'b'))
  assert.equal(c.status, 0)
  agree(c, d)
})

test('option names: the types list exactly the engine\'s choices', () => {
  // index.d.ts is written by hand: each option's union of names must be
  // the engine's table, which index.js checks against and the command
  // line parses.
  const dts = readFileSync(join(dirname(fileURLToPath(import.meta.resolve('kopiru'))), 'index.d.ts'), 'utf8')
  for (const key of ['method', 'sync', 'sparse', 'follow', 'preserve', 'format']) {
    const line = dts.split('\n').find((l) => l.trimStart().startsWith(`${key}?:`))
    assert.ok(line, `no '${key}?:' in index.d.ts`)
    const named = [...line.matchAll(/'([^']+)'/g)].map((m) => m[1])
    assert.deepEqual(named, [...choices[key]], `index.d.ts ${key}`)
  }
})

test('option names: the command line takes the engine\'s choices', async (t) => {
  const why = cannotRunCli()
  if (why) { console.log(`!!! SKIPPED ${t.name}: ${why}`); return t.skip(`SKIPPED: ${why}`) }
  const help = spawnSync(cli, ['copy', '--help'], { encoding: 'utf8' }).stdout
  for (const key of ['method', 'sync', 'sparse']) {
    for (const name of choices[key]) assert.match(help, new RegExp(`- ${name}:`), `kopiru copy --help lists ${key} ${name}`)
  }
  const flashHelp = spawnSync(cli, ['flash', '--help'], { encoding: 'utf8' }).stdout
  for (const name of choices.format) assert.match(flashHelp, new RegExp(`- ${name}:`), `kopiru flash --help lists format ${name}`)
})
