#!/usr/bin/env bash
# Runs the whole test suite. As root on Debian/Ubuntu it first installs what
# the filesystem tests need (xfsprogs, btrfs-progs, strace, ...); without root
# or loop devices those tests are reported as ignored, with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
command -v strace >/dev/null || need+=(strace)
command -v losetup >/dev/null || need+=(mount)
command -v sfdisk >/dev/null || need+=(fdisk)
command -v xz >/dev/null || need+=(xz-utils)
command -v zstd >/dev/null || need+=(zstd)
command -v bzip2 >/dev/null || need+=(bzip2)
command -v gzip >/dev/null || need+=(gzip)
command -v bmaptool >/dev/null || need+=(bmap-tools)
if ((${#need[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "!!! missing ${need[*]} and cannot install them: the tests needing them will be ignored" >&2
  fi
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set -o pipefail
status=0
cargo test --workspace "$@" 2>&1 | tee "$log" || status=$?
# One closing line for the whole run; ignored tests are the skipped ones.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' "$log"
exit $status
