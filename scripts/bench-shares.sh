#!/usr/bin/env bash
# Copies to, from and within a *simulated* share (kopiru-slowfs: FUSE, a
# fixed delay per metadata operation, no network), timed round-robin by
# interleave.py against cp -r, rsync -a and fpsync -n 8.
# usage: scripts/bench-shares.sh DELAY_MS RUNS CORPUS [into|out|within] [KOPIRU]
set -euo pipefail
delay=$1 runs=$2 corpus=$3 dir=${4:-into}
here=$(cd "$(dirname "$0")" && pwd)
k=${5:-$here/../target/release/kopiru}
slowfs=$(dirname "$k")/kopiru-slowfs
w=/var/tmp/kopiru-shares
root=$w/root mnt=$w/mnt
mkdir -p "$root" "$mnt" "$w/local"
mountpoint -q "$mnt" && umount "$mnt"
case $dir in
  into) src=$corpus dst=$mnt/dst ;;
  out | within)
    [ -d "$root/src" ] || cp -a "$corpus" "$root/src"
    src=$mnt/src
    if [ "$dir" = out ]; then dst=$w/local/dst; else dst=$mnt/dst; fi ;;
esac
# Before each run: the destination removed behind the mount's back, and the
# share mounted afresh (no cached lookups or attributes carried over).
prep="mountpoint -q $mnt && umount $mnt; rm -rf $root/dst $w/local/dst; \
  ($slowfs $root $mnt --delay-ms $delay >/dev/null 2>&1 &); \
  for i in \$(seq 50); do mountpoint -q $mnt && break; sleep 0.1; done"
"$here/interleave.py" "$runs" "$prep" \
  "cp=cp -r $src $dst" \
  "rsync=rsync -a $src/ $dst/" \
  "fpsync=fpsync -n 8 -t $w/fpsync $src/ $dst/" \
  "default=$k copy $src $dst" \
  "j2=$k copy -j 2 $src $dst" \
  "j8=$k copy -j 8 $src $dst" \
  "j32=$k copy -j 32 $src $dst" \
  "j64=$k copy -j 64 $src $dst"
umount "$mnt"
