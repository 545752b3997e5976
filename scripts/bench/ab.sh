#!/usr/bin/env bash
# A/B timing of kopiru builds beside cpz and fcp on one fresh loop-mounted
# filesystem: how each change in docs/BENCHMARKS.md ("Where the time goes")
# was measured before and after. Each BUILD is a kopiru binary (copy it aside
# before rebuilding); extra copy options can be given through a wrapper
# script. kopiru runs with --sync none, like the peers. The runs are
# interleaved (scripts/bench/interleave.py: one run of each command per round, in
# a rotated order), so drift on a noisy machine hits every command alike.
# Prints medians and the ratio (faster of cpz and fcp ÷ each build; where
# the peers are not installed, build1 ÷ each build, so before/after A/B runs
# need nothing but the two kopiru binaries).
#
# usage: scripts/bench/ab.sh FS CORPUS RUNS BUILD...
# e.g.:  scripts/bench/ab.sh xfs /var/tmp/kc/n16384 10 /tmp/k-before target/release/kopiru
# The filesystem stays mounted at /mnt/kopiru-ab-FS-CORPUS for further runs.
set -euo pipefail
fs=$1 corpus=$(readlink -f "$2") runs=$3; shift 3
P=${PEERS_ROOT:-$HOME/.cache/kopiru-peers}/bin
name=$(basename "$corpus")
img=/var/tmp/kopiru-ab-$fs-$name.img mnt=/mnt/kopiru-ab-$fs-$name
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
mountpoint -q "$mnt" || corpus_fs "$fs" "$corpus" "$img" "$mnt"
args=()
for peer in cpz fcp; do
  [[ -x $P/$peer ]] && args+=("$peer=$P/$peer $mnt/src $mnt/dst")
done
i=0
for k in "$@"; do
  i=$((i + 1)); args+=("build$i=$(readlink -f "$k") copy --sync none $mnt/src $mnt/dst")
done
line=$(python3 "$ROOT/scripts/bench/interleave.py" "$runs" "rm -rf $mnt/dst; sync" "${args[@]}")
python3 - "$line" <<'PY'
import sys
m = {k: float(v[:-2]) for k, v in (f.split("=") for f in sys.argv[1].split())}
peers = [m[p] for p in ("cpz", "fcp") if p in m]
best = min(peers) if peers else m["build1"]
print(sys.argv[1], " ratios:",
      " ".join(f"{k}={best / v:.2f}" for k, v in m.items() if k.startswith("build")))
PY
