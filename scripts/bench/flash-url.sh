#!/usr/bin/env bash
# `kopiru flash URL` (issue 30) against `curl -s URL | DECOMPRESSOR -dc | dd`
# and `bmaptool copy URL`, served from 127.0.0.1 by the tests' server
# (crates/kopiru-cli/tests/fs/http_server.py).
#
# RAW is a raw disk image (for the issue: a 1 GiB ext4 filesystem full of
# real files). Beside it the script makes, if missing, RAW.xz (`xz -6 -T1`:
# one block) and RAW.zst (`zstd -19`), and a loop device backed by a file
# in the same directory. Each format is flashed by every tool, interleaved
# (scripts/bench/interleave.py: medians of RUNS rounds after a warm-up one); the
# device is compared with RAW after the last run of each tool. Equal work:
# kopiru with --no-verify (the others do not read back), dd with
# conv=fsync (kopiru flushes the device before it exits) and
# iflag=fullblock (from a pipe, dd's reads are short: without it bs=4M
# writes pieces of a few KiB, each a direct write), bmaptool with
# --nobmap (no block map, every byte written). Then kopiru's peak RSS
# (/usr/bin/time, verification on) per format.
#
# usage: scripts/bench/flash-url.sh RAW [RUNS]      (as root; default RUNS 3)
# KOPIRU=path picks the binary (default: target/release/kopiru, built).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
raw=$(realpath "$1") runs=${2:-3}
cd "$ROOT"
dir=$(dirname "$raw") name=$(basename "$raw")
k=$(release_kopiru)
for t in curl xz zstd dd /usr/bin/time losetup; do
  command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 2; }
done
[[ -f $raw.xz ]] || { xz -6 -T1 -c "$raw" > "$raw.xz.tmp" && mv "$raw.xz.tmp" "$raw.xz"; }
[[ -f $raw.zst ]] || { zstd -q -19 -c "$raw" > "$raw.zst.tmp" && mv "$raw.zst.tmp" "$raw.zst"; }
ls -l "$raw" "$raw.xz" "$raw.zst" >&2

size=$(stat -c %s "$raw")
backing=$(mktemp "$dir/device.XXXXXX.img")
truncate -s $((size + (64 << 20))) "$backing"
dev=$(losetup -f --show "$backing")
server=$(mktemp -d)
python3 crates/kopiru-cli/tests/fs/http_server.py "$dir" /dev/null > "$server/port" &
srv=$!
trap 'kill $srv 2>/dev/null; losetup -d $dev; rm -rf "$server" "$backing"' EXIT
for _ in $(seq 50); do [[ -s $server/port ]] && break; sleep 0.1; done
[[ -s $server/port ]] || { echo "the test server did not start" >&2; exit 1; }
base=http://127.0.0.1:$(cat "$server/port")/$name

for fmt in xz zst; do
  url=$base.$fmt
  case $fmt in xz) dec="xz -dc" ;; zst) dec="zstd -dc" ;; esac
  pipe=$server/pipe-$fmt.sh
  printf '#!/bin/sh\ncurl -sf %s | %s | dd of=%s iflag=fullblock oflag=direct conv=fsync bs=4M status=none\n' \
    "$url" "$dec" "$dev" > "$pipe"
  echo "== $fmt: $(stat -c %s "$raw.$fmt") bytes served"
  tools=("kopiru=$k flash --yes --no-progress --no-verify $url $dev" "pipe=sh $pipe")
  if command -v bmaptool >/dev/null; then
    tools+=("bmaptool=bmaptool -q copy --nobmap $url $dev")
  else
    echo "!!! bmaptool not installed: not compared"
  fi
  # The device discarded (zeros) before each run, so that each tool is seen to write it.
  prep="blkdiscard -f $dev 2>/dev/null || true"
  python3 scripts/bench/interleave.py "$runs" "$prep" "${tools[@]}"
  for t in "${tools[@]}"; do
    eval "$prep"
    ${t#*=} > /dev/null 2>&1 || { echo "!!! ${t%%=*} failed"; exit 1; }
    if ! cmp -n "$size" "$dev" "$raw" > /dev/null; then
      echo "!!! ${t%%=*}: the device differs from the image"
      exit 1
    fi
    echo "  ${t%%=*}: device == image"
  done
  /usr/bin/time -f "  kopiru (verified): %e s wall, %U+%S s CPU, peak RSS %M KiB" \
    "$k" flash --yes --no-progress "$url" "$dev" > /dev/null
done
