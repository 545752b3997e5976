#!/usr/bin/env bash
# The cost of sharding, and kopiru as fpart's job command, on one fresh
# loop-mounted filesystem (issue 17's benchmark). Interleaved runs
# (scripts/interleave.py), medians:
#   single  kopiru copy -j 2                           (one process, 2 workers)
#   mpi2    mpirun -n 2 kopiru copy --shard auto       (2 ranks, 1 worker each)
#   fpart   fpart -L -f 20000 -W 'kopiru copy -a --files-from "$FPART_PARTFILENAME" ...'
#   fpsync  fpsync -n 2 -f 20000 (rsync jobs, fpsync's default rsync options)
#   launch  mpirun -n 2 true: the launcher's own cost, included in mpi2
# and prints mpi2's ratio to single (target ≥ 0.9) and fpart's to fpsync
# (target ≥ 3). The copies run with --sync none, as the peers do not flush.
#
# usage: scripts/bench-shard.sh FS CORPUS RUNS
# e.g.:  scripts/bench-shard.sh xfs /var/tmp/kc/n262144 5
set -euo pipefail
fs=$1 corpus=$(readlink -f "$2") runs=$3
cd "$(dirname "$0")/.."
cargo build --release -q --bin kopiru
k=$PWD/target/release/kopiru
name=$(basename "$corpus")
img=/var/tmp/kopiru-shard-$fs-$name.img mnt=/mnt/kopiru-shard-$fs-$name
[[ $fs == ext4 || $fs == xfs ]] || { echo "FS must be ext4 or xfs" >&2; exit 2; }
source scripts/loopfs.sh
mountpoint -q "$mnt" || corpus_fs "$fs" "$corpus" "$img" "$mnt"
mpi="mpirun --allow-run-as-root --oversubscribe -n 2"
# fpart's hook runs through a shell; interleave.py splits on spaces, so
# each multi-word command is a small script.
tmp=$(mktemp -d)
cat >"$tmp/fpart.sh" <<EOF
#!/bin/sh
mkdir -p $tmp/parts && exec fpart -L -f 20000 -o $tmp/parts/part \
  -W '$k copy -a --sync none --files-from "\$FPART_PARTFILENAME" $mnt/src $mnt/dst' $mnt/src >/dev/null
EOF
cat >"$tmp/fpsync.sh" <<EOF
#!/bin/sh
exec fpsync -n 2 -f 20000 -t $tmp/fpsync $mnt/src/ $mnt/dst/
EOF
chmod +x "$tmp"/*.sh
line=$(python3 scripts/interleave.py "$runs" "rm -rf $mnt/dst $tmp/parts $tmp/fpsync; sync" \
  "single=$k copy -j 2 --sync none $mnt/src $mnt/dst" \
  "mpi2=$mpi $k copy --shard auto --sync none $mnt/src $mnt/dst" \
  "fpart=$tmp/fpart.sh" \
  "fpsync=$tmp/fpsync.sh" \
  "launch=$mpi true")
rm -rf "$tmp"
python3 - "$line" "$fs" "$name" <<'PY'
import sys
m = {k: float(v[:-2]) for k, v in (f.split("=") for f in sys.argv[1].split())}
print(f"{sys.argv[2]} {sys.argv[3]}: {sys.argv[1]}  mpi2/single={m['single'] / m['mpi2']:.2f}"
      f"  fpart-kopiru/fpsync={m['fpsync'] / m['fpart']:.2f}")
PY
