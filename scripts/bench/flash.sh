#!/usr/bin/env bash
# kopiru flash beside dd and bmaptool (issue 5): a SIZE image of random data
# onto a loop device (backing file in /var/tmp), wall time until the tool
# exits (each ends with a flush of the device), user and system CPU, and
# peak RSS (/usr/bin/time). Also kopiru's peak RSS for an xz image.
#
# usage: scripts/bench/flash.sh [SIZE_MIB] [RUNS]      (default 2048 3)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
mib=${1:-2048} runs=${2:-3}
need bmaptool bmap-tools
need /usr/bin/time time
install_missing
k=$(release_kopiru)
img=/var/tmp/kopiru-flash-bench-$mib.img back=/var/tmp/kopiru-flash-bench-dev.img
[[ -f $img ]] || head -c "$((mib << 20))" /dev/urandom > "$img"
[[ -f $img.xz ]] || head -c $((256 << 20)) "$img" | xz -T0 -1 > "$img.xz"
rm -f "$back"; truncate -s "$((mib + 64))M" "$back"
dev=$(losetup -f --show "$back")
trap 'losetup -d "$dev"; rm -f "$back"' EXIT
declare -A cmds=(
  ["kopiru flash --no-verify"]="$k flash --yes --no-progress --no-verify $img $dev"
  ["kopiru flash (verify)"]="$k flash --yes --no-progress $img $dev"
  ["dd bs=4M oflag=direct conv=fsync"]="dd if=$img of=$dev bs=4M oflag=direct conv=fsync status=none"
  ["bmaptool copy --nobmap"]="bmaptool -q copy --nobmap $img $dev"
)
out=$(mktemp)
for r in $(seq "$runs"); do
  for name in "${!cmds[@]}"; do
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    cat "$img" > /dev/null   # the image in the page cache for every tool alike
    # shellcheck disable=SC2086 # the command is a string of words, split on purpose
    /usr/bin/time -f "%e %U %S %M" -o "$out.t" ${cmds[$name]}
    echo "$name|$(cat "$out.t")" >> "$out"
    echo "run $r: $name: $(cat "$out.t")" >&2
  done
done
/usr/bin/time -f "%e %U %S %M" -o "$out.t" "$k" flash --yes --no-progress "$img.xz" "$dev"
echo "kopiru flash xz (256 MiB image, verify)|$(cat "$out.t")" >> "$out"
python3 - "$out" "$mib" "$runs" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, vals = line.rstrip("\n").split("|")
    rows[name].append([float(x) for x in vals.split()])
print(f"{sys.argv[2]} MiB random image onto a loop device; medians of {sys.argv[3]} runs")
print(f"  {'tool':<40} {'wall s':>7} {'CPU s':>6} {'CPU/wall':>8} {'peak RSS MiB':>12}")
for name, v in rows.items():
    wall = statistics.median(x[0] for x in v)
    cpu = statistics.median(x[1] + x[2] for x in v)
    rss = statistics.median(x[3] for x in v) / 1024
    print(f"  {name:<40} {wall:7.2f} {cpu:6.2f} {cpu / wall:8.2f} {rss:12.1f}")
PY
