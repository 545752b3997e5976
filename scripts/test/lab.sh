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
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
VENV=${LAB_VENV:-$HOME/.cache/kopiru-lab/venv}

# The lab is one check: when it cannot run at all, one skip.
skip_lab() {
    skip "crash lab: $*"
    tally
    exit 0
}

if [ "${LAB_NO_INSTALL:-0}" != 1 ]; then
    need qemu-system-x86_64 qemu-system-x86
    ls /boot/vmlinuz-6.1.* >/dev/null 2>&1 || MISSING+=(linux-image-amd64)
    need /bin/busybox busybox-static
    need dmsetup dmsetup
    need mkfs.xfs xfsprogs
    need mkfs.btrfs btrfs-progs
    need rpc.nfsd nfs-kernel-server
    need smbd samba
    need mount.cifs cifs-utils
    install_missing || skip_lab "cannot install what it needs (above)"
    if [ ! -x "$VENV/bin/vng" ]; then
        echo "lab: installing virtme-ng into $VENV" >&2
        { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q virtme-ng; } >&2 ||
            skip_lab "cannot install virtme-ng into $VENV"
    fi
fi
export PATH=$VENV/bin:$PATH
command -v vng >/dev/null || skip_lab "no vng (virtme-ng)"
command -v qemu-system-x86_64 >/dev/null || skip_lab "no qemu-system-x86_64"
KERNEL=$(compgen -G '/boot/vmlinuz-6.1.*' | sort -V | tail -n 1)
[ -n "$KERNEL" ] || skip_lab "no Debian 6.1 kernel in /boot"

echo "lab: building release kopiru and kopiru-lab" >&2
if ! cargo build --release -q -p kopiru-cli -p kopiru-lab >&2; then
    fail "building release kopiru and kopiru-lab"
    finish
fi
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
    skip_lab "cannot stage the guest's files in $STAGE"
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
PASS=$(grep -c '^PASS ' "$TMP/out")
FAIL=$(grep -c '^FAIL ' "$TMP/out")
SKIP=$(grep -c '^SKIP ' "$TMP/out")
grep -h '^  \.\. ' "$TMP/out" "$TMP/err" | head -n 40 >&2
grep -E '^(PASS|FAIL|SKIP) ' "$TMP/out"
if ! grep -q '^GUEST DONE' "$TMP/out"; then
    if [ $((PASS + FAIL + SKIP)) = 0 ]; then
        tail -n 20 "$TMP/err" >&2
        skip_lab "the guest did not run (vng exited $rc)"
    fi
    echo "FAIL guest: did not finish (vng exited $rc); last output:"
    tail -n 15 "$TMP/err" | sed 's/^/  /'
    FAIL=$((FAIL + 1))
fi
grep '^SKIP all' "$TMP/out" | sed 's/^SKIP all: /!!!!!!!! SKIPPED: crash lab: /'
echo "lab: wall time $((SECONDS - START)) s" >&2
tally
[ "$FAIL" = 0 ]
