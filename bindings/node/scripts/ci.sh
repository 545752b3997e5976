#!/usr/bin/env bash
# CI for the Node.js binding: from a fresh clone, install the tools
# (npm ci: @napi-rs/cli), build the native addon (release), then pack the
# package, install the tarball into an empty project and run the tests there.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { echo "ci.sh: node is not installed" >&2; exit 1; }
echo "== node $(node --version), npm $(npm --version)"
echo "== npm ci"
npm ci --no-audit --no-fund
# The README's examples compiled with tsc against index.d.ts (typescript and
# @types/node are devDependencies, installed by npm ci above). Counted as one
# test in the run's tally; a failure fails this script after the suite ran.
echo "== README examples against index.d.ts: node scripts/check-readme.mjs"
readme=0
if node scripts/check-readme.mjs; then
  echo "1 passed, 0 failed, 0 skipped"
else
  readme=1
  echo "0 passed, 1 failed, 0 skipped"
fi
echo "== npm run build"
npm run build
echo "== packed-package tests"
bash scripts/test-packed.sh
exit "$readme"
