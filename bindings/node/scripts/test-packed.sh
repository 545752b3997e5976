#!/usr/bin/env bash
# Tests the package as a user gets it: `npm pack`, the tarball installed into
# an empty scratch project in a temporary directory, and the node --test
# suite (test/*.test.mjs) run there, importing `kopiru` from that install.
# Needs a build first (npm run build). As root the tests make loop ext4 and
# XFS filesystems and a loop device; otherwise those tests are skipped, each
# with its reason. Extra arguments go to `node --test`.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
if ! ls kopiru.*.node >/dev/null 2>&1 || [[ ! -f binding.js ]]; then
  echo "test-packed: no native build here: run 'npm run build' first" >&2
  exit 1
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/kopiru-packed.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The tests run one copy as an unprivileged user (uid 65534), which must be
# able to reach the installed package.
chmod 755 "$work"

tarball="$(npm pack --silent --pack-destination "$work" | tail -n 1)"
echo "== packed $tarball ($(du -h "$work/$tarball" | cut -f1))"
tar -tzf "$work/$tarball" | sed 's/^/   /'

mkdir "$work/project"
cd "$work/project"
cat > package.json <<'JSON'
{ "name": "kopiru-packed-test", "version": "0.0.0", "private": true, "type": "module" }
JSON
npm install --no-audit --no-fund --silent "$work/$tarball"
cp -r "$here/test" ./test
# The command line built from this checkout, for test/agree.test.mjs (the
# binding and the command must give the same summary and exit code).
if [[ -z "${KOPIRU_CLI:-}" ]] && command -v cargo >/dev/null; then
  (cd "$here/../.." && cargo build -q -p kopiru-cli) &&
    KOPIRU_CLI="$(cd "$here/../.." && cargo metadata --format-version 1 --no-deps |
      node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')/debug/kopiru"
fi
export KOPIRU_CLI="${KOPIRU_CLI:-}"
echo "== node --test in $work/project, kopiru from node_modules/kopiru"
node --test --test-concurrency=1 "$@" test/*.test.mjs
