#!/usr/bin/env bash
# Time until a copy is durable (issue 4): kopiru's --sync modes beside the
# peers followed by `sync -f DST` (syncfs of the destination), and
# `rsync -a --fsync`. Each run copies CORPUS's src/ to a fresh dst/ on a
# fresh loop-mounted filesystem; dst/ is removed and `sync` run before every
# run, outside the timing. Prints medians and ratios.
#
# usage: scripts/bench/durable.sh FS CORPUS [RUNS]     (FS: ext4 or xfs)
# e.g.:  scripts/bench/durable.sh ext4 /var/tmp/kc/n16384 11
# Corpus: ../shared/bench/mkcorpus.py ROOT 256 16384 (see docs/BENCHMARKS.md).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
fs=$1 corpus=$(readlink -f "$2") runs=${3:-11}
P=${PEERS_ROOT:-$HOME/.cache/kopiru-peers}/bin
k=$(release_kopiru)
img=/var/tmp/kopiru-durable-$fs.img mnt=/mnt/kopiru-durable-$fs
[[ $fs == ext4 || $fs == xfs ]] || { echo "FS must be ext4 or xfs" >&2; exit 2; }
corpus_fs "$fs" "$corpus" "$img" "$mnt"
S=$mnt/src D=$mnt/dst
cmds=(
  -n "kopiru (--sync end)" "$k copy $S $D"
  -n "kopiru --sync none" "$k copy --sync none $S $D"
  -n "kopiru --sync none + sync -f" "sh -c '$k copy --sync none $S $D && sync -f $D'"
  -n "kopiru --sync file" "$k copy --sync file $S $D"
  -n "cp -a + sync -f" "sh -c 'cp -a $S $D && sync -f $D'"
  -n "cpz + sync -f" "sh -c '$P/cpz $S $D && sync -f $D'"
  -n "xcp + sync -f" "sh -c '$P/xcp -r $S $D && sync -f $D'"
  -n "fcp + sync -f" "sh -c '$P/fcp $S $D && sync -f $D'"
)
out=$(mktemp -d)
hyperfine -N --runs "$runs" --prepare "sh -c 'rm -rf $D; sync'" "${cmds[@]}" --export-json "$out/fast.json" >&2
hyperfine -N --runs 3 --prepare "sh -c 'rm -rf $D; sync'" \
  -n "rsync -a --fsync" "rsync -a --fsync $S/ $D" --export-json "$out/rsync.json" >&2
umount "$mnt"; rm -f "$img"
python3 - "$out" "$fs" "$(basename "$corpus")" <<'PY'
import json, statistics, sys
out, fs, corpus = sys.argv[1:]
med = {}
for f in ("fast.json", "rsync.json"):
    for r in json.load(open(f"{out}/{f}"))["results"]:
        med[r["command"]] = statistics.median(r["times"])
k = med["kopiru (--sync end)"]
peers = {n: t for n, t in med.items() if "+ sync -f" in n and not n.startswith("kopiru")}
best = min(peers, key=peers.get)
print(f"{fs} {corpus}: median seconds until durable")
for n, t in med.items():
    print(f"  {n:<30} {t:8.3f}")
print(f"  fastest peer + sync -f ({best}) / kopiru end: {peers[best] / k:.2f}x (target >= 1.3)")
print(f"  rsync -a --fsync / kopiru end: {med['rsync -a --fsync'] / k:.1f}x (target >= 20)")
print(f"  kopiru end / kopiru none: {k / med['kopiru --sync none']:.2f}x (target <= 1.3)")
PY
