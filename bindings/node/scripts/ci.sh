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
echo "== npm run build"
npm run build
echo "== packed-package tests"
bash scripts/test-packed.sh
