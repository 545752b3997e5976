#!/bin/bash
# The crash lab, host side (see docs/LAB.md): installs what it needs (as
# root, with apt-get and a virtme-ng venv), builds release kopiru and
# kopiru-lab, makes eight sparse disk images in a temporary directory, boots
# Debian's kernel once under QEMU (software emulation) running
# scripts/test/lab-guest.sh, and prints one line per scenario and a final
#   N passed, N failed, N skipped
# Exits non-zero on any failure. If the lab cannot run here, it says so
# loudly and counts as skipped, never as passed.
#
# Env: LAB_ONLY (regex of scenario names), LAB_MAXP (crash points per
# scenario, default 8), LAB_NO_INSTALL=1, LAB_VENV (default
# ~/.cache/kopiru-lab/venv).
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
VENV=${LAB_VENV:-$HOME/.cache/kopiru-lab/venv}
T0=$SECONDS

skip() {
    echo "!!!!!!!! SKIPPED: crash lab: $*"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
}

if [ "${LAB_NO_INSTALL:-0}" != 1 ]; then
    need=()
    command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
    ls /boot/vmlinuz-6.1.* >/dev/null 2>&1 || need+=(linux-image-amd64)
    [ -x /bin/busybox ] || need+=(busybox-static)
    command -v dmsetup >/dev/null || need+=(dmsetup)
    command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
    command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs)
    command -v rpc.nfsd >/dev/null || need+=(nfs-kernel-server)
    command -v smbd >/dev/null || need+=(samba)
    command -v mount.cifs >/dev/null || need+=(cifs-utils)
    if [ ${#need[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "lab: installing ${need[*]}" >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >/dev/null 2>&1 ||
                { apt-get update >/dev/null 2>&1 &&
                    DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >/dev/null 2>&1; } ||
                skip "apt-get install ${need[*]} failed"
        else
            skip "missing ${need[*]} (run as root with apt-get to install)"
        fi
    fi
    if [ ! -x "$VENV/bin/vng" ]; then
        echo "lab: installing virtme-ng into $VENV" >&2
        { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q virtme-ng; } >&2 ||
            skip "cannot install virtme-ng into $VENV"
    fi
fi
export PATH=$VENV/bin:$PATH
command -v vng >/dev/null || skip "no vng (virtme-ng)"
command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64"
KERNEL=$(ls /boot/vmlinuz-6.1.* 2>/dev/null | sort -V | tail -n 1)
[ -n "$KERNEL" ] || skip "no Debian 6.1 kernel in /boot"

echo "lab: building release kopiru and kopiru-lab" >&2
cargo build --release -q -p kopiru-cli -p kopiru-lab >&2 || {
    echo "FAIL build"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
}
BIN=$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kopiru-lab.XXXXXX")
# The guest mounts fresh tmpfs on /tmp and /var/tmp, so a checkout or a
# target directory there is out of its sight: the guest script and the two
# binaries are staged under $HOME, which it shares with the host.
mkdir -p "$HOME/.cache/kopiru-lab"
STAGE=$(mktemp -d "$HOME/.cache/kopiru-lab/run.XXXXXX")
trap 'rm -rf "$TMP" "$STAGE"' EXIT
cp "$ROOT/scripts/test/lab-guest.sh" "$BIN/kopiru" "$BIN/kopiru-lab" "$STAGE/" ||
    skip "cannot stage the guest's files in $STAGE"
# Two lanes of scenarios side by side (lab-guest.sh), four disks each.
disks=()
for lane in 0 1; do
    for d in data log replay check; do
        truncate -s 1G "$TMP/$d$lane.img"
        disks+=(--disk "$TMP/$d$lane.img")
    done
done

echo "lab: booting $KERNEL (emulated, 2 vCPUs); the guest's progress follows" >&2
vng -r "$KERNEL" --disable-kvm --cpus 2 -m 2G "${disks[@]}" \
    --exec "LAB_BIN=$STAGE LAB_ONLY='${LAB_ONLY:-.}' LAB_MAXP=${LAB_MAXP:-8} bash $STAGE/lab-guest.sh" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
pass=$(grep -c '^PASS ' "$TMP/out")
fail=$(grep -c '^FAIL ' "$TMP/out")
skipn=$(grep -c '^SKIP ' "$TMP/out")
grep -h '^  \.\. ' "$TMP/out" "$TMP/err" | head -n 40 >&2
grep -E '^(PASS|FAIL|SKIP) ' "$TMP/out"
if ! grep -q '^GUEST DONE' "$TMP/out"; then
    if [ $((pass + fail + skipn)) = 0 ]; then
        tail -n 20 "$TMP/err" >&2
        skip "the guest did not run (vng exited $rc)"
    fi
    echo "FAIL guest: did not finish (vng exited $rc); last output:"
    tail -n 15 "$TMP/err" | sed 's/^/  /'
    fail=$((fail + 1))
fi
grep '^SKIP all' "$TMP/out" | sed 's/^SKIP all: /!!!!!!!! SKIPPED: crash lab: /'
echo "lab: wall time $((SECONDS - T0)) s" >&2
echo "$pass passed, $fail failed, $skipn skipped"
[ "$fail" = 0 ]
