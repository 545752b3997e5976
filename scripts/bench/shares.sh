#!/usr/bin/env bash
# Copies to, from and within a *simulated* share (kopiru-slowfs: FUSE, a
# fixed delay per metadata operation, no network), timed round-robin by
# interleave-capped.py against cp -r, rsync -a, fpsync -n 8, rclone copy
# --transfers 32 and cpz. One call is one cell (a delay, a corpus, a
# direction); docs/BENCHMARKS.md ("Shares, simulated") lists the calls.
#
# usage: scripts/bench/shares.sh DELAY_MS RUNS CORPUS into|out|within [TOOL...]
#   TOOL: cp rsync fpsync rclone cpz default j2 j8 j32 j64 j128 j256 prev
#   (all but prev by default; prev is PREV's default, an earlier build),
#   each optionally NAME/RUNS (fewer rounds than RUNS) and @SECONDS (killed
#   after SECONDS; the run is then reported as a lower bound), e.g. cp/1@600.
# environment:
#   W       work directory (default /var/tmp/kopiru-shares); W/root is the
#           share's backing directory (ROOT) and W/local the local side (the
#           destination of `out`). Mount a loop ext4 image on each first
#           (docs/BENCHMARKS.md); the script refuses to write to /'s filesystem.
#   KOPIRU  the kopiru binary (default target/release/kopiru, built);
#           kopiru-slowfs is taken from the same directory
#   CPZ     the cpz binary (default: cpz on PATH)
#   PREV    an earlier kopiru build, for the tool prev (A/B on the share)
#   LOG     a file to append one JSON line per run to (default W/runs.jsonl)
#   WARM    the tool run once, untimed, before round 1 (default: default)
set -euo pipefail
delay=$1 runs=$2 corpus=$(cd "$3" && pwd) dir=$4
shift 4
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
k=$(release_kopiru)
slowfs=$(dirname "$k")/kopiru-slowfs
cpz=${CPZ:-cpz}
w=${W:-/var/tmp/kopiru-shares}
root=$w/root mnt=$w/mnt local=$w/local
log=${LOG:-$w/runs.jsonl}
mkdir -p "$root" "$mnt" "$local"
for d in "$root" "$local"; do
  if [ "$(stat -c %d "$d")" = "$(stat -c %d /)" ]; then
    echo "$d is on /'s filesystem: mount a loop image there first" >&2
    exit 2
  fi
done
mountpoint -q "$mnt" && umount "$mnt"
name=$(basename "$corpus")
case $dir in
  into) src=$corpus dst=$mnt/dst back_src=$corpus back_dst=$root/dst ;;
  out | within)
    # The corpus is put on the share once, behind the mount's back.
    [ -d "$root/src-$name" ] || cp -a "$corpus" "$root/src-$name"
    src=$mnt/src-$name back_src=$root/src-$name
    if [ "$dir" = out ]; then dst=$local/dst back_dst=$local/dst
    else dst=$mnt/dst back_dst=$root/dst; fi ;;
  *) echo "direction: into, out or within" >&2; exit 2 ;;
esac
# Before each run (untimed): the destinations removed behind the mount's
# back, dirty pages written, and the share mounted afresh (no cached lookups
# or attributes carried over).
prep="mountpoint -q $mnt && umount $mnt; rm -rf $root/dst $local/dst $local/fpsync; sync; \
  ($slowfs $root $mnt --delay-ms $delay >/dev/null 2>&1 &); \
  for i in \$(seq 100); do mountpoint -q $mnt && break; sleep 0.1; done; mountpoint -q $mnt"
# After each run (untimed): files and symlinks at the destination, read
# behind the mount's back, against the source's count.
want=$(find "$back_src" ! -type d | wc -l)
check="echo \$(find $back_dst ! -type d 2>/dev/null | wc -l)/$want"

declare -A cmd=(
  [cp]="cp -r $src $dst"
  [rsync]="rsync -a $src/ $dst/"
  [fpsync]="fpsync -n 8 -t $local/fpsync $src/ $dst/"
  [rclone]="rclone copy --transfers 32 $src $dst"
  [cpz]="$cpz $src $dst"
  [default]="$k copy $src $dst"
  [j2]="$k copy -j 2 $src $dst"
  [j8]="$k copy -j 8 $src $dst"
  [j32]="$k copy -j 32 $src $dst"
  [j64]="$k copy -j 64 $src $dst"
  [j128]="$k copy -j 128 $src $dst"
  [j256]="$k copy -j 256 $src $dst"
  [prev]="${PREV:-PREV-not-set} copy $src $dst"
)
[ $# -gt 0 ] || set -- cp rsync fpsync rclone cpz default j2 j8 j32 j64 j128 j256
specs=()
for t in "$@"; do
  base=${t%%[/@]*}
  [ -n "${cmd[$base]:-}" ] || { echo "unknown tool $base" >&2; exit 2; }
  specs+=("$t=${cmd[$base]}")
done
echo "# slowfs ${delay} ms, $name $dir, $runs rounds, $(date -u +%FT%TZ)" >&2
echo "{\"cell\": \"${delay}ms $name $dir\", \"start\": \"$(date -u +%FT%TZ)\"}" >> "$log"
"$ROOT/scripts/bench/interleave-capped.py" --warm "${WARM:-default}" --check "$check" --log "$log" \
  "$runs" "$prep" "${specs[@]}"
umount "$mnt"
