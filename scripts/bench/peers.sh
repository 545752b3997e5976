#!/usr/bin/env bash
# Times kopiru beside cp, rsync, xcp, cpz and fcp on fresh loop-mounted
# filesystems (../shared/bench/peers.sh), plus `kopiru copy -a` against the
# peers that keep the same metadata (cp -a, rsync -a). Writes hyperfine JSON to
# OUT and prints a table of medians and ratios (fastest peer ÷ kopiru).
# kopiru runs with --sync none, since no peer flushes: this compares copying;
# scripts/bench/durable.sh compares the time until the copy is on disk.
#
# usage: scripts/bench/peers.sh OUT FS[,FS...] CORPUS... [-- EXTRA KOPIRU ARGS]
# e.g.:  scripts/bench/peers.sh /tmp/bench ext4,xfs,btrfs /var/tmp/kc/n16384 /var/tmp/kc/n1
# Corpora: ../shared/bench/mkcorpus.py ROOT 256 1 256 16384 262144 (see docs/BENCHMARKS.md).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
out=$1 fss=$2; shift 2
corpora=() extra=()
while [[ $# -gt 0 && $1 != -- ]]; do corpora+=("$(readlink -f "$1")"); shift; done
[[ ${1:-} == -- ]] && { shift; extra=("$@"); }
runs=${RUNS:-5}
peers=$(readlink -f "$ROOT/../shared/bench/peers.sh")
k=$(release_kopiru)
mkdir -p "$out"
for fs in ${fss//,/ }; do
  for c in "${corpora[@]}"; do
    name=$(basename "$c")
    bash "$peers" --fs "$fs" --runs "$runs" --json "$out/$fs-$name.json" "$c" -- "$k" copy --sync none "${extra[@]}" >&2
    mnt=/mnt/kopiru-bench-$fs-$name
    hyperfine -N --runs "$runs" --prepare "sh -c 'rm -rf $mnt/dst; sync'" \
      -n kopiru-a "$k copy -a --sync none ${extra[*]} $mnt/src $mnt/dst" \
      --export-json "$out/$fs-$name-archive.json" >&2
    # Unmount so the next corpus does not compete for page cache.
    rm -rf "$mnt/dst"; umount "$mnt" && rm -f "/var/tmp/kopiru-bench-$fs-$name.img"
  done
done
python3 - "$out" <<'PY'
import json, os, statistics, sys
out = sys.argv[1]
for f in sorted(os.listdir(out)):
    if not f.endswith(".json") or f.endswith("-archive.json"):
        continue
    fs, corpus = f[:-5].split("-", 1)
    med = {r["command"]: statistics.median(r["times"]) for r in json.load(open(os.path.join(out, f)))["results"]}
    arch = os.path.join(out, f[:-5] + "-archive.json")
    if os.path.exists(arch):
        med["kopiru -a"] = statistics.median(json.load(open(arch))["results"][0]["times"])
    peers = {k: v for k, v in med.items() if k in ("cp-r", "cp-a", "rsync-a", "xcp", "cpz", "fcp")}
    best = min(peers, key=peers.get)
    same_meta = min(med["cp-a"], med["rsync-a"])
    print(f"| {fs} | {corpus} | " + " | ".join(f"{med.get(k, float('nan')):.3f}" for k in ("cp-r", "cp-a", "rsync-a", "xcp", "cpz", "fcp", "kopiru", "kopiru -a"))
          + f" | {best} | **{peers[best] / med['kopiru']:.2f}** | **{same_meta / med['kopiru -a']:.2f}** |")
PY
