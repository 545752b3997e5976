#!/usr/bin/env bash
# kopiru gui against kopiru flash (issue 38): the same 1 GiB xz image onto
# one and onto two loop devices, interleaved (scripts/bench/interleave.py: medians
# of RUNS rounds, the image in the page cache before each run, devices
# flushed). The page's time is from "Flash" (the POST) to "verified" (the
# result on the event stream, as the page gets it): scripts/bench/gui-flash.py,
# a whole process, as `kopiru flash --yes` is. Then the peak RSS of the
# server and of its helper, and the stripped binary with the gui and
# without it (--no-default-features).
#
# The image: an ext4 filesystem of real files (from /usr/share and
# /usr/lib, as scripts/bench/image.sh makes it), compressed with xz -3 on
# two threads (blocks of 12 MiB; kopiru decodes them on one thread per
# CPU but one, within --memory: one thread on two CPUs). The devices: loop devices over files on a fresh
# loop-mounted ext4 (never the root filesystem). As root: the helper is a
# plain child (no elevation prompt in the timing).
#
# usage: scripts/bench/gui.sh [RUNS]      (default 3)
# Needs root, xz, mkfs.ext4, /usr/bin/time (package time), strip. Keeps the
# image in /var/tmp/kopiru-gui-bench for the next run.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT"
runs=${1:-3}
work=/var/tmp/kopiru-gui-bench
mkdir -p "$work"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}

# -- the binary's size, with the page and without it (stripped) --
cargo build --release -q -p kopiru-cli --no-default-features
strip -o "$work/kopiru-nogui" "$CARGO_TARGET_DIR/release/kopiru"
cargo build --release -q -p kopiru-cli
strip -o "$work/kopiru-gui" "$CARGO_TARGET_DIR/release/kopiru"
k=$CARGO_TARGET_DIR/release/kopiru
with=$(stat -c %s "$work/kopiru-gui") without=$(stat -c %s "$work/kopiru-nogui")

# -- the image --
img=$work/fs.img
if [[ ! -f $img.xz ]]; then
  system_files_image "$img" 1024 70
  xz -T2 -3 -c "$img" > "$img.xz.tmp"
  mv "$img.xz.tmp" "$img.xz"
  rm -f "$img"
fi

# -- two devices on a fresh loop-mounted filesystem --
mnt=$work/mnt
loop_fs ext4 "$work/devs.img" "$mnt" 3072
truncate -s 1100M "$mnt/a.img" "$mnt/b.img"
a=$(losetup -f --show "$mnt/a.img")
b=$(losetup -f --show "$mnt/b.img")
session=$work/session.json
gui=
cleanup() {
  if [[ -n $gui ]] && kill -INT "$gui" 2>/dev/null; then wait "$gui" 2>/dev/null || true; fi
  losetup -d "$a" "$b" 2>/dev/null || true
  umount "$mnt" 2>/dev/null || true
  rm -f "$work/devs.img" "$session"
}
trap cleanup EXIT

# -- the server, signed in once (the page's cookie, for gui-flash.py) --
coproc GUI { exec "$k" gui --json --no-open --idle-timeout 3600 2>"$work/gui.log"; }
gui=$GUI_PID
read -r line <&"${GUI[0]}"
python3 - "$line" "$session" <<'PY'
import json, socket, sys
info = json.loads(sys.argv[1])
port, path = info["port"], info["url"].split(str(info["port"]), 1)[1]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
r = b""
while c := s.recv(65536): r += c
cookie = [l.split(b":", 1)[1].split(b";")[0].strip().decode()
          for l in r.split(b"\r\n") if l.lower().startswith(b"set-cookie:")][0]
json.dump({"port": port, "cookie": cookie, "pid": info["pid"]}, open(sys.argv[2], "w"))
PY
server_pid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pid'])" "$session")

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
prepare="sync; echo 3 > /proc/sys/vm/drop_caches; cat $img.xz > /dev/null"
python3 scripts/bench/interleave.py "$runs" "$prepare" \
  "cli1=$k flash --yes --no-progress $img.xz $a" \
  "gui1=python3 scripts/bench/gui-flash.py $session $img.xz $a" \
  "cli2=$k flash --yes --no-progress $img.xz $a $b" \
  "gui2=python3 scripts/bench/gui-flash.py $session $img.xz $a $b" | tee "$work/times.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# The devices hold the image (the last run's).
xz -dc "$img.xz" | cmp -n "$(xz -lv --robot "$img.xz" | awk '/^totals/ {print $5}')" - "$b"

# Peak RSS: the server over its whole life, the helpers' own (each
# reports its VmHWM in its result), and the command's.
server_kib=$(awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status")
helper_kib=$(python3 - "$session" <<'PY'
import json, socket, sys
s = json.load(open(sys.argv[1]))
c = socket.create_connection(("127.0.0.1", s["port"]))
c.sendall(f"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:{s['port']}\r\nCookie: {s['cookie']}\r\n\r\n".encode())
r = b""
while d := c.recv(1 << 20): r += d
state = json.loads(r.split(b"\r\n\r\n", 1)[1])
print(max(j["result"]["peak_rss_kib"] for j in state["jobs"] if j["result"]))
PY
)
/usr/bin/time -f "%M" -o "$work/cli.rss" "$k" flash --yes --no-progress "$img.xz" "$a" "$b"
python3 - "$work/times.txt" "$with" "$without" "$server_kib" "$helper_kib" "$(cat "$work/cli.rss")" <<'PY'
import re, sys
ms = dict(re.findall(r"(\w+)=(\d+)ms", open(sys.argv[1]).read().splitlines()[-1]))
with_, without, server, helper, cli = (int(x) for x in sys.argv[2:7])
print()
for n in ("1", "2"):
    c, g = int(ms["cli" + n]), int(ms["gui" + n])
    print(f"{n} device{'s' if n == '2' else ''}: kopiru flash {c / 1000:.2f} s, kopiru gui {g / 1000:.2f} s:"
          f" the page at {c / g:.3f} of the command's speed")
print(f"peak RSS: server {server / 1024:.1f} MiB + helper {helper / 1024:.1f} MiB"
      f" = {(server + helper) / 1024:.1f} MiB (kopiru flash alone: {cli / 1024:.1f} MiB)")
print(f"stripped binary: {with_ / 1048576:.2f} MiB with the gui, {without / 1048576:.2f} MiB"
      f" without: +{(with_ - without) / 1024:.0f} KiB")
PY
