#!/usr/bin/env bash
# kopiru dedupe beside `fclones group | fclones dedupe` and `duperemove -dr`
# (issue 6). Each run: a fresh pair of copies of CORPUS made without reflink
# on a loop-mounted XFS (reflink=1), synced; then the tool is timed and the
# free space (statfs, after `sync -f`) compared before and after. Prints the
# median time and median space freed per tool.
#
# usage: scripts/bench/dedupe.sh CORPUS [RUNS]
# e.g.:  scripts/bench/dedupe.sh /var/tmp/kc/node_modules 5
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
corpus=$(readlink -f "$1") runs=${2:-5}
PEERS_ROOT=${PEERS_ROOT:-$HOME/.cache/kopiru-peers}
need duperemove duperemove
install_missing
[[ -x $PEERS_ROOT/bin/fclones ]] || cargo install -q --root "$PEERS_ROOT" fclones
k=$(release_kopiru) fc=$PEERS_ROOT/bin/fclones
img=/var/tmp/kopiru-dedupe-xfs.img mnt=/mnt/kopiru-dedupe-xfs
loop_fs xfs "$img" "$mnt" $(($(du -sk "$corpus" | cut -f1) * 4 / 1024 + 1024))
python3 - "$corpus" "$mnt" "$runs" "$k" "$fc" <<'PY'
import os, shutil, statistics, subprocess, sys, time
corpus, mnt, runs, k, fc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
t = f"{mnt}/t"
tools = {
    "kopiru dedupe": f"{k} dedupe --no-progress {t} >/dev/null",
    "kopiru dedupe --min-size 1": f"{k} dedupe --min-size 1 --no-progress {t} >/dev/null",
    "fclones group | dedupe": f"{fc} group --hidden --no-ignore {t} 2>/dev/null | {fc} dedupe 2>/dev/null >/dev/null",
    "duperemove -dr": f"duperemove -dr -q {t} >/dev/null 2>&1",
}
def free():
    subprocess.run(["sync", "-f", mnt], check=True)
    st = os.statvfs(mnt)
    return st.f_bfree * st.f_frsize
res = {n: [] for n in tools}
for r in range(runs):
    for name, cmd in tools.items():
        shutil.rmtree(t, ignore_errors=True)
        os.makedirs(t)
        for copy in ("a", "b"):
            subprocess.run(["cp", "-a", "--reflink=never", corpus, f"{t}/{copy}"], check=True)
        subprocess.run(["sync"], check=True)
        before = free()
        start = time.monotonic()
        subprocess.run(cmd, shell=True, check=True)
        secs = time.monotonic() - start
        res[name].append((secs, free() - before))
        print(f"run {r + 1}: {name}: {secs:.2f} s, {(res[name][-1][1]) / 2**20:.0f} MiB freed", file=sys.stderr)
shutil.rmtree(t, ignore_errors=True)
print(f"two copies of {corpus} on XFS; medians of {runs} runs")
print(f"  {'tool':<24} {'seconds':>8} {'MiB freed':>10}")
for name, v in res.items():
    print(f"  {name:<24} {statistics.median(x[0] for x in v):8.2f} {statistics.median(x[1] for x in v) / 2**20:10.0f}")
PY
umount "$mnt"; rm -f "$img"
