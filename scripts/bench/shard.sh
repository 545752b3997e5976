#!/usr/bin/env bash
# The cost of sharding, and kopiru as fpart's job command, on one fresh
# loop-mounted filesystem (issue 17's benchmark). Interleaved runs
# (scripts/bench/interleave.py), medians:
#   single  kopiru copy -j 2                           (one process, 2 workers)
#   mpi2    mpirun -n 2 kopiru copy --shard auto       (2 ranks, 1 worker each)
#   fpart   fpart -L -f 20000 -W 'kopiru copy --files-from "$FPART_PARTFILENAME" ...'
#           (each job in turn: fpart waits for its hooks)
#   fpartx  fpart -L -f 20000 -W 'echo "$FPART_PARTFILENAME"' | xargs -P 2 kopiru copy ...
#           (two jobs at a time while fpart goes on crawling, as fpsync -n 2 runs them)
#   fpsync  fpsync -n 2 -f 20000 (rsync jobs, fpsync's default rsync options)
#   launch  mpirun -n 2 true: the launcher's own cost, included in mpi2
# and prints mpi2's ratio to single (target ≥ 0.9) and fpsync's to fpart
# and fpartx (target ≥ 3). The copies run with --sync none, as the peers
# do not flush. The fpart jobs do fpsync's work: its rsync options are
# -lptgoD --numeric-ids (links, modes, times, owners, devices; no xattrs
# or ACLs, no hard links), so the jobs keep --preserve mode,times,owner
# (JOBOPTS; JOBOPTS=-a adds xattrs and hard links).
#
# usage: scripts/bench/shard.sh FS CORPUS RUNS
# e.g.:  scripts/bench/shard.sh xfs /var/tmp/kc/n262144 5
set -euo pipefail
fs=$1 corpus=$(readlink -f "$2") runs=$3
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT"
k=$(release_kopiru)
name=$(basename "$corpus")
img=/var/tmp/kopiru-shard-$fs-$name.img mnt=/mnt/kopiru-shard-$fs-$name
[[ $fs == ext4 || $fs == xfs ]] || { echo "FS must be ext4 or xfs" >&2; exit 2; }
mountpoint -q "$mnt" || corpus_fs "$fs" "$corpus" "$img" "$mnt"
mpi="mpirun --allow-run-as-root --oversubscribe -n 2"
jobopts=${JOBOPTS:---preserve mode,times,owner}
job="$k copy $jobopts --sync none --files-from"
# fpart's hook runs through a shell; interleave.py splits on spaces, so
# each multi-word command is a small script.
tmp=$(mktemp -d)
cat >"$tmp/fpart.sh" <<EOF
#!/bin/sh
mkdir -p $tmp/parts && exec fpart -L -f 20000 -o $tmp/parts/part \
  -W '$job "\$FPART_PARTFILENAME" $mnt/src $mnt/dst' $mnt/src >/dev/null
EOF
cat >"$tmp/fpartx.sh" <<EOF
#!/bin/sh
mkdir -p $tmp/parts && fpart -L -f 20000 -o $tmp/parts/part \
  -W 'echo "\$FPART_PARTFILENAME"' $mnt/src | xargs -P 2 -I{} $job {} $mnt/src $mnt/dst
EOF
cat >"$tmp/fpsync.sh" <<EOF
#!/bin/sh
exec fpsync -n 2 -f 20000 -t $tmp/fpsync $mnt/src/ $mnt/dst/
EOF
chmod +x "$tmp"/*.sh
line=$(python3 scripts/bench/interleave.py "$runs" "rm -rf $mnt/dst $tmp/parts $tmp/fpsync; sync" \
  "single=$k copy -j 2 --sync none $mnt/src $mnt/dst" \
  "mpi2=$mpi $k copy --shard auto --sync none $mnt/src $mnt/dst" \
  "fpart=$tmp/fpart.sh" \
  "fpartx=$tmp/fpartx.sh" \
  "fpsync=$tmp/fpsync.sh" \
  "launch=$mpi true")
rm -rf "$tmp"
python3 - "$line" "$fs" "$name" <<'PY'
import sys
m = {k: float(v[:-2]) for k, v in (f.split("=") for f in sys.argv[1].split())}
print(f"{sys.argv[2]} {sys.argv[3]}: {sys.argv[1]}  mpi2/single={m['single'] / m['mpi2']:.2f}"
      f"  fpsync/fpart={m['fpsync'] / m['fpart']:.2f}  fpsync/fpartx={m['fpsync'] / m['fpartx']:.2f}")
PY
