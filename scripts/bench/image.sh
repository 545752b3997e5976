#!/usr/bin/env bash
# kopiru image (issue 19) against the pipelines people use by hand.
#
# A SIZE MiB ext4 image filled with real files (copied from /usr/share and
# /usr/lib) on a loop device (direct I/O, so no read comes from the page
# cache). Then, interleaved (scripts/bench/interleave.py: medians of RUNS rounds,
# outputs removed before each run), at the same level each time:
#   zstd -3:  kopiru image (--no-verify, and with its read-back) against
#             `dd iflag=direct bs=4M | zstd -T0 -3 > out`, with and
#             without a `sync out` after it (kopiru flushes its output)
#   xz -2:    kopiru image --no-verify against `dd ... | xz -T0 -2`, synced
#   gzip -6:  kopiru image --no-verify against `dd ... | gzip -6`, synced
#             (and pigz -6 where installed)
# Wall and CPU time (user + system, children included) and peak RSS (from
# /usr/bin/time: for a pipeline, its largest process). One more kopiru
# output of each format is checked against the device at the end.
#
# usage: scripts/bench/image.sh [SIZE_MIB] [RUNS]        (default 1024 3)
#        FORMATS="zst xz" scripts/bench/image.sh ...      (default: zst xz gz)
# Needs root (losetup), zstd, xz, gzip, mkfs.ext4, /usr/bin/time (package
# time, installed if missing). The filesystem image is kept in /var/tmp/kopiru-image-bench for
# the next run.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT"
mib=${1:-1024} runs=${2:-3} formats=" ${FORMATS:-zst xz gz} "
need /usr/bin/time time
install_missing
work=/var/tmp/kopiru-image-bench
mkdir -p "$work"
k=$(release_kopiru)

# The filesystem: real files, as many as fit with room for ext4's own
# blocks (and the tails of many small files: 70 % of the size).
img=$work/ext4-$mib.img
system_files_image "$img" "$mib" 70
tmp=$(mktemp -d)
RSS_DIR=$tmp
out=$work/out
dev=
cleanup() { [[ -n $dev ]] && losetup -d "$dev"; rm -rf "$tmp" "$out"; }
trap cleanup EXIT
mkdir -p "$out"
dev=$(losetup -f --show --direct-io=on --read-only "$img")
sum=$(sha256sum < "$img" | cut -d' ' -f1)

pipe() {  # NAME COMPRESSOR [sync]: the dd pipeline as a script; with
  # "sync", the output is flushed to disk at the end, as kopiru's is
  local then=
  [[ ${3:-} == sync ]] && then=" && sync $out/$1"
  echo "dd if=$dev iflag=direct bs=4M status=none | $2 > $out/$1$then" > "$tmp/pipe-$1.sh"
  timed "$1" "bash $tmp/pipe-$1.sh"
}
check() {  # EXT DECOMPRESSOR: one more kopiru run, whose output holds the
  # device's bytes
  rm -f "$out"/*
  "$k" image --no-progress --no-verify "$dev" "$out/check.img.$1" > /dev/null
  [[ $($2 < "$out/check.img.$1" | sha256sum | cut -d' ' -f1) == "$sum" ]] ||
    { echo "  the .$1 image does not decompress to the device's bytes!"; exit 1; }
  stat -c '    %s bytes  %n' "$out/check.img.$1"
}

echo "== $mib MiB ext4 image of real files on $dev (loop, direct I/O), $(nproc) CPUs," \
  "medians of $runs interleaved runs"
if [[ $formats == *" zst "* ]]; then
echo "-- zstd -3"
python3 scripts/bench/interleave.py "$runs" "rm -f $out/*" \
  "$(timed kopiru "$k image --no-progress --no-verify $dev $out/k.img.zst")" \
  "$(timed kopiru+verify "$k image --no-progress $dev $out/kv.img.zst")" \
  "$(pipe dd-zstd-T0 'zstd -q -T0 -3')" \
  "$(pipe dd-zstd-T0+sync 'zstd -q -T0 -3' sync)" 2> "$tmp/out" >/dev/null
report "$tmp/out"
check zst "zstd -dc"
fi

if [[ $formats == *" xz "* ]]; then
echo "-- xz -2"
python3 scripts/bench/interleave.py "$runs" "rm -f $out/*" \
  "$(timed kopiru "$k image --no-progress --no-verify $dev $out/k.img.xz")" \
  "$(pipe dd-xz-T0+sync 'xz -T0 -2' sync)" 2> "$tmp/out" >/dev/null
report "$tmp/out"
check xz "xz -dc"
fi

if [[ $formats == *" gz "* ]]; then
echo "-- gzip -6"
gz=("$(timed kopiru "$k image --no-progress --no-verify $dev $out/k.img.gz")"
  "$(pipe dd-gzip+sync 'gzip -6' sync)")
command -v pigz > /dev/null && gz+=("$(pipe dd-pigz+sync 'pigz -6' sync)")
python3 scripts/bench/interleave.py "$runs" "rm -f $out/*" "${gz[@]}" 2> "$tmp/out" >/dev/null
report "$tmp/out"
check gz "gzip -dc"
fi
