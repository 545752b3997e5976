#!/usr/bin/env bash
# Issue 18's table: kopiru against cpz at equal work, against `cp -a` with
# -a, and the time until the copy is durable, in ONE interleaved run per
# filesystem and corpus (scripts/bench/interleave.py: every command once per
# round, rotated; `rm -rf dst; sync` before each run, outside the timing).
# Each FS gets a fresh loop-mounted filesystem (corpus_fs, scripts/lib.sh).
#
# Commands per round:
#   cpz                      cpz SRC DST                (mode only, no times)
#   k_mode                   kopiru --preserve mode     (cpz's work)
#   k                        kopiru, default metadata   (mode and times)
#   cp_a / k_a               cp -a / kopiru -a
#   cpz_sync / k_end         cpz && sync -f DST / kopiru --sync end (default)
#                            (ext4 and XFS only: the issue's durable target)
# The copy commands run kopiru with --sync none, as the peers do not flush.
#
# usage: scripts/bench/equal.sh RUNS FS[,FS...] CORPUS... [-- KOPIRU]
# e.g.:  scripts/bench/equal.sh 7 ext4,xfs,btrfs /var/tmp/kc/n16384 /var/tmp/kc/node_modules
# Needs cpz (../shared/bench/peers.sh installs it under ~/.cache/kopiru-peers).
# Prints one line per FS and corpus: medians in ms and the issue's ratios
# (the peer's median ÷ kopiru's).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
runs=$1 fss=$2; shift 2
corpora=()
while [[ $# -gt 0 && $1 != -- ]]; do corpora+=("$(readlink -f "$1")"); shift; done
[[ ${1:-} == -- ]] && shift
k=$(KOPIRU=${1:-${KOPIRU:-}} release_kopiru)
cpz=${PEERS_ROOT:-$HOME/.cache/kopiru-peers}/bin/cpz
[[ -x $cpz ]] || { echo "cpz not found at $cpz: run ../shared/bench/peers.sh" >&2; exit 2; }
# interleave.py splits commands on spaces, so the pipelines are scripts.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2016 # $1 and $2 are the written script's own arguments
printf '#!/bin/sh\n"%s" "$1" "$2" && sync -f "$2"\n' "$cpz" > "$tmp/cpz_sync"
chmod +x "$tmp/cpz_sync"
for fs in ${fss//,/ }; do
  for c in "${corpora[@]}"; do
    name=$(basename "$c")
    img=/var/tmp/kopiru-equal-$fs-$name.img mnt=/mnt/kopiru-equal-$fs-$name
    corpus_fs "$fs" "$c" "$img" "$mnt"
    S=$mnt/src D=$mnt/dst
    cmds=(
      "cpz=$cpz $S $D"
      "k_mode=$k copy --sync none --preserve mode $S $D"
      "k=$k copy --sync none $S $D"
      "cp_a=cp -a $S $D"
      "k_a=$k copy -a --sync none $S $D"
    )
    if [[ $fs != btrfs ]]; then
      cmds+=("cpz_sync=$tmp/cpz_sync $S $D" "k_end=$k copy $S $D")
    fi
    line=$(python3 "$ROOT/scripts/bench/interleave.py" "$runs" "rm -rf $D; sync" "${cmds[@]}")
    umount "$mnt"; rm -f "$img"
    python3 - "$fs" "$name" "$line" <<'PY'
import sys
fs, name, line = sys.argv[1:]
m = {k: float(v[:-2]) for k, v in (f.split("=") for f in line.split())}
r = [f"mode {m['cpz'] / m['k_mode']:.2f}", f"default {m['cpz'] / m['k']:.2f}",
     f"-a {m['cp_a'] / m['k_a']:.2f}"]
if "k_end" in m:
    r.append(f"durable {m['cpz_sync'] / m['k_end']:.2f}")
print(f"{fs} {name}: {line}  ratios: {', '.join(r)}")
PY
  done
done
