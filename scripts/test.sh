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
if ((${#need[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "!!! missing ${need[*]} and cannot install them: the tests needing them will be ignored" >&2
  fi
fi
exec cargo test --workspace "$@"
