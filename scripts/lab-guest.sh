#!/bin/bash
# The crash lab's guest side (see docs/LAB.md). Runs as root inside the
# Debian kernel booted by scripts/lab.sh, with four host-backed disks:
#   /dev/vda  copy-on-write store of the logged data device
#   /dev/vdb  the dm-log-writes log
#   /dev/vdc  copy-on-write store of the replay device (never mounted)
#   /dev/vdd  copy-on-write store of the throwaway check device (mounted)
# Every device starts as a snapshot of a dm "zero" target, so each scenario
# gets a fresh, zeroed disk without writing 400 MB.
#
# Per scenario: log-writes over the data device, mkfs, mount, prepare, mark
# "start", run the command, mark "done" if it exited 0, unmount. Then replay
# the log forward to each flush/FUA entry between the marks (and to the
# "done" mark itself), snapshot the replay, mount the snapshot (journal
# recovery happens there), check the invariants with `kopiru-lab check`,
# throw the snapshot away.
#
# Prints "PASS name ...", "FAIL name ...", "SKIP name ..." lines; the host
# counts them. Env: LAB_BIN (dir with kopiru and kopiru-lab), LAB_ONLY (a
# regex of scenario names), LAB_MAXP (crash points checked per scenario).
set -u
BIN=${LAB_BIN:?}
KOPIRU=$BIN/kopiru
LAB=$BIN/kopiru-lab
MAXP=${LAB_MAXP:-20}
ONLY=${LAB_ONLY:-.}
SZ=819200 # sectors: 400 MiB (mkfs.xfs wants >= 300 MB)
W=/tmp/lab
mkdir -p $W/mnt $W/ck

log() { echo "  .. $*" >&2; }

modprobe -a dm-log-writes dm-snapshot dm-zero xfs btrfs 2>/dev/null
for m in dm_log_writes dm_snapshot; do
    if ! grep -q "^$m " /proc/modules; then
        echo "SKIP all: module $m not loaded in $(uname -r)"
        exit 0
    fi
done
dmsetup create zero0 --table "0 $SZ zero" || { echo "SKIP all: no dm zero target"; exit 0; }

# A fresh zeroed device NAME whose writes land on COW.
fresh() { dmsetup create "$1" --table "0 $SZ snapshot /dev/mapper/zero0 $2 N 8"; }
rmdev() { dmsetup remove "$1" 2>/dev/null || { sleep 0.5; dmsetup remove "$1"; }; }

mkfs_for() { # FS DEV
    case $1 in
    ext4) mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$2" ;;
    xfs) mkfs.xfs -q -f -K "$2" ;;
    btrfs) mkfs.btrfs -q -f -K "$2" >/dev/null ;;
    esac
}
mount_fs() { # FS DEV DIR
    [ "$1" = btrfs ] && btrfs device scan --forget >/dev/null 2>&1
    mount -t "$1" "$2" "$3"
}

# Source trees, on the guest's RAM /tmp (not on the logged device).
# tree DIR SEED NFILES: files of 0 B .. 192 KiB with 2 of ~1.5 MiB, in
# 8 subdirectories; contents depend on SEED so an old version differs.
tree() {
    python3 - "$@" <<'EOF'
import os, random, sys
d, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
for i in range(n):
    sub = os.path.join(d, "d%d" % (i % 8))
    os.makedirs(sub, exist_ok=True)
    size = r.choice([0, 1, 100, 4095, 4096, 65535, 65536, 120000, r.randrange(1, 100000)])
    if i in (7, 8):
        size = 1500000 + seed
    with open(os.path.join(sub, "f%03d" % i), "wb") as f:
        f.write(r.randbytes(size))
EOF
}
rm -rf $W/src $W/old $W/big
tree $W/src 1 240
tree $W/old 2 120 # half the names: the rest are new names in existing directories
mkdir -p $W/big && head -c 24M /dev/urandom >$W/big/big.bin
IMG=$W/flash.img
head -c 3M /dev/urandom >$IMG
log "sources: $(du -sh $W/src | cut -f1) in $(find $W/src -type f | wc -l) files"

# The self-test's deliberately unsafe writer: writes each file's first
# half, syncs, writes the rest, and "exits 0" without syncing.
unsafe_writer() { # SRC DST
    python3 - "$1" "$2" <<'EOF'
import os, sys
src, dst = sys.argv[1], sys.argv[2]
files = []
for d, _, names in os.walk(src):
    os.makedirs(os.path.join(dst, os.path.relpath(d, src)), exist_ok=True)
    files += [os.path.relpath(os.path.join(d, n), src) for n in names]
data = {f: open(os.path.join(src, f), "rb").read() for f in files}
for f in files:
    with open(os.path.join(dst, f), "wb") as o:
        o.write(data[f][: len(data[f]) // 2])
os.sync()
for f in files:
    with open(os.path.join(dst, f), "ab") as o:
        o.write(data[f][len(data[f]) // 2 :])
EOF
}

# scenario NAME FS KIND
#   KIND: copy | syncfile | merge | mergefile | big | unsafe | flash
scenario() {
    local name=$1 fs=$2 kind=$3 t0=$SECONDS
    local src=$W/src old="" rc dst=$W/mnt/dst pts s d
    [[ $name =~ $ONLY ]] || return 0
    fresh data /dev/vda || { echo "FAIL $name: cannot create data device"; return; }
    dmsetup create lw --table "0 $SZ log-writes /dev/mapper/data /dev/vdb" ||
        { echo "FAIL $name: cannot create log-writes"; rmdev data; return; }
    local lwdev
    lwdev=$(readlink -f /dev/mapper/lw)
    if [ "$kind" != flash ]; then
        mkfs_for "$fs" /dev/mapper/lw && mount_fs "$fs" /dev/mapper/lw $W/mnt ||
            { echo "FAIL $name: mkfs/mount $fs"; rmdev lw; rmdev data; return; }
    fi
    case $kind in
    merge | mergefile)
        old=$W/old
        mkdir -p $dst && cp -a $W/old/. $dst/ && sync ;;
    big) src=$W/big ;;
    esac
    dmsetup message lw 0 mark start
    case $kind in
    copy) $KOPIRU copy -a -T $src $dst >$W/out 2>&1 ;;
    syncfile) $KOPIRU copy -a --sync file -T $src $dst >$W/out 2>&1 ;;
    merge) $KOPIRU copy -a -T $src $dst >$W/out 2>&1 ;;
    mergefile) $KOPIRU copy -a --sync file -T $src $dst >$W/out 2>&1 ;;
    big) $KOPIRU copy -a -T $src $dst >$W/out 2>&1 ;;
    unsafe) unsafe_writer $src $dst >$W/out 2>&1 ;;
    flash) $KOPIRU flash --yes $IMG "$lwdev" >$W/out 2>&1 ;;
    esac
    rc=$?
    [ $rc = 0 ] && dmsetup message lw 0 mark done
    [ "$kind" != flash ] && umount $W/mnt
    rmdev lw
    rmdev data
    if [ $rc != 0 ]; then
        echo "FAIL $name: command exited $rc: $(tail -n 3 $W/out | tr '\n' ' ')"
        return
    fi
    $LAB points /dev/vdb >$W/points || { echo "FAIL $name: cannot read the log"; return; }
    s=$(awk '$5=="start"{print $1}' $W/points)
    d=$(awk '$5=="done"{print $1}' $W/points)
    # Crash points: every flush/FUA entry strictly between the marks, then
    # the "done" mark itself (exit 0: everything must be there).
    awk -v s="$s" -v d="$d" '$1>s && $1<d && $5=="-"{print $1}' $W/points >$W/all
    local n
    n=$(wc -l <$W/all)
    # Sample at most MAXP of them, evenly, always keeping the last.
    awk -v n="$n" -v m="$MAXP" 'n<=m || (NR-1)%int((n+m-1)/m)==0 || NR==n' $W/all >$W/sel
    echo "$d" >>$W/sel
    local checked=0 bad=0 last=-1 p first_bad="" out done_bad=""
    fresh rp /dev/vdc || { echo "FAIL $name: cannot create replay device"; return; }
    while read -r p; do
        $LAB replay /dev/vdb /dev/mapper/rp --from $((last + 1)) --to "$p" 2>/dev/null ||
            { echo "FAIL $name: replay to $p failed"; bad=1; break; }
        last=$p
        dmsetup create ck --table "0 $SZ snapshot /dev/mapper/rp /dev/vdd N 8" ||
            { echo "FAIL $name: cannot snapshot the replay"; bad=1; break; }
        checked=$((checked + 1))
        local at="entry $p"
        [ "$p" = "$d" ] && at="entry $p (done mark, after exit 0)"
        if [ $kind = flash ]; then
            # The device holds the whole image at the done mark; before it,
            # its first MiB is either the old one (zeros) or the image's.
            if [ "$p" = "$d" ]; then
                cmp -s -n $(stat -c %s $IMG) $IMG /dev/mapper/ck || out="image not on the device"
            else
                cmp -s -n 1048576 $IMG /dev/mapper/ck || cmp -s -n 1048576 /dev/zero /dev/mapper/ck ||
                    out="first MiB is neither old nor new"
            fi
            if [ -n "${out:-}" ]; then
                bad=$((bad + 1))
                [ -z "$first_bad" ] && first_bad="$at: $out"
                out=""
            fi
        elif ! mount_fs "$fs" /dev/mapper/ck $W/ck 2>$W/merr; then
            bad=$((bad + 1))
            [ -z "$first_bad" ] && first_bad="$at: mount failed: $(head -c 200 $W/merr)"
        else
            local args=()
            [ -n "$old" ] && args+=(--old "$old")
            [ "$p" = "$d" ] && args+=(--complete)
            if ! out=$($LAB check $src $W/ck/dst "${args[@]}" 2>&1); then
                bad=$((bad + 1))
                [ -z "$first_bad" ] &&
                    first_bad="$at: $(echo "$out" | grep -c VIOLATION) violations, e.g. $(echo "$out" | head -n 2 | tr '\n' ';')"
                [ $bad = 1 ] && echo "$out" | head -n 3 | sed "s/^/  .. $name $at: /" >&2
                [ "$p" = "$d" ] && done_bad="; at the done mark (after exit 0): $(echo "$out" | grep -c VIOLATION) violations, e.g. $(echo "$out" | head -n 1)"
            fi
            umount $W/ck
        fi
        rmdev ck
    done <$W/sel
    rmdev rp
    local secs=$((SECONDS - t0))
    if [ $kind = unsafe ]; then
        # The self-test: the checker must catch the unsafe writer.
        if [ $bad -gt 0 ]; then
            echo "PASS $name: checker caught the unsafe writer at $bad of $checked crash points (first: $first_bad) [$n flush points, ${secs}s]"
        else
            echo "FAIL $name: checker did not catch the unsafe writer at any of $checked crash points"
        fi
    elif [ $bad -gt 0 ]; then
        echo "FAIL $name: violated at $bad of $checked crash points; first at $first_bad${done_bad} [$n flush points, ${secs}s]"
    else
        echo "PASS $name: $checked crash points checked (of $n flush points between the marks, + the done mark) [${secs}s]"
    fi
}

scenario selftest-unsafe-ext4 ext4 unsafe
scenario copy-btrfs btrfs copy
scenario merge-btrfs btrfs merge
scenario mergefile-btrfs btrfs mergefile
scenario syncfile-btrfs btrfs syncfile
scenario copy-ext4 ext4 copy
scenario copy-xfs xfs copy
scenario syncfile-ext4 ext4 syncfile
scenario syncfile-xfs xfs syncfile
scenario merge-ext4 ext4 merge
scenario merge-xfs xfs merge
scenario mergefile-ext4 ext4 mergefile
scenario big-ext4 ext4 big
scenario big-btrfs btrfs big
scenario flash-raw raw flash
dmsetup remove zero0
echo "GUEST DONE"
