// Compiles the README's JavaScript and TypeScript examples with tsc against
// index.d.ts (strict; the JavaScript ones checked as with // @ts-check), so
// the docs and the types cannot drift apart. Needs `npm ci` first (the
// typescript and @types/node devDependencies). Exits non-zero when an
// example does not compile, or when the README has none.
//   node scripts/check-readme.mjs
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const blocks = [...readme.matchAll(/^```(js|ts)\n([\s\S]*?)^```$/gm)].map((m) => ({
  lang: m[1],
  code: m[2],
  line: readme.slice(0, m.index).split('\n').length + 1,
}))
if (blocks.length === 0) {
  console.error('check-readme: no ```js or ```ts block in README.md')
  process.exit(1)
}

const work = mkdtempSync(join(tmpdir(), 'kopiru-readme-'))
process.on('exit', () => rmSync(work, { recursive: true, force: true }))
// The package as an importer sees it: `kopiru` resolves to index.d.ts.
const pkg = join(work, 'node_modules', 'kopiru')
mkdirSync(pkg, { recursive: true })
copyFileSync(join(root, 'index.d.ts'), join(pkg, 'index.d.ts'))
writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'kopiru', types: 'index.d.ts', main: 'index.js' }))
const files = blocks.map((b, i) => {
  // ES modules (top-level await), one file each: their names cannot clash.
  const name = `readme-line-${b.line}-${i}.${b.lang === 'ts' ? 'mts' : 'mjs'}`
  writeFileSync(join(work, name), b.code)
  return name
})
writeFileSync(join(work, 'tsconfig.json'), JSON.stringify({
  compilerOptions: {
    strict: true,
    noEmit: true,
    allowJs: true,
    checkJs: true,
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    types: ['node'],
    typeRoots: [join(root, 'node_modules', '@types')],
    skipLibCheck: false,
  },
  files,
}, null, 2))

const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
try {
  execFileSync(process.execPath, [tsc, '-p', work], { stdio: 'pipe', encoding: 'utf8' })
} catch (e) {
  // tsc names the file; its name says the README line the block starts on.
  console.error(`check-readme: an example in README.md does not compile against index.d.ts:\n${e.stdout}${e.stderr}`)
  process.exit(1)
}
console.log(`check-readme: ${blocks.length} examples of README.md compile against index.d.ts (tsc ${JSON.parse(readFileSync(join(root, 'node_modules', 'typescript', 'package.json'), 'utf8')).version})`)
