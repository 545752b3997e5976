#!/bin/bash
# The crash lab's guest side (see docs/LAB.md). Runs as root inside the
# Debian kernel booted by scripts/test/lab.sh, with four host-backed disks:
#   /dev/vda  copy-on-write store of the logged data device
#   /dev/vdb  the dm-log-writes log
#   /dev/vdc  copy-on-write store of the replay device (never mounted)
#   /dev/vdd  copy-on-write store of the throwaway check device (mounted)
# and /dev/vde-vdh the same for a second lane of scenarios run beside the
# first (see lane()).
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
MAXP=${LAB_MAXP:-8}
ONLY=${LAB_ONLY:-.}
SZ=819200 # sectors: 400 MiB (mkfs.xfs wants >= 300 MB)
W=/tmp/lab
mkdir -p $W

log() { echo "  .. $*" >&2; }

modprobe -a dm-log-writes dm-snapshot dm-zero dm-flakey xfs btrfs 2>/dev/null
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
# tree DIR SEED NFILES: files of 0 B .. 120 KB with 2 of ~1 MB, in
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
        size = 1000000 + seed
    with open(os.path.join(sub, "f%03d" % i), "wb") as f:
        f.write(r.randbytes(size))
EOF
}
rm -rf $W/src $W/old $W/olddel $W/ref $W/big
tree $W/src 1 160
tree $W/old 2 80 # half the names: the rest are new names in existing directories
tree $W/olddel 3 200 # every name, other contents, and 40 names --delete removes
# A reference for --link-dest/--clone-dest: half its files unchanged (same
# bytes, size and time), half an older version.
cp -a $W/src $W/ref && cp -a $W/old/. $W/ref/
mkdir -p $W/big && head -c 24M /dev/urandom >$W/big/big.bin
IMG=$W/flash.img
head -c 3M /dev/urandom >$IMG
# The "device" kopiru image reads (--file): data, a run of zeros, data.
DISK=$W/disk.bin
{ head -c 6M /dev/urandom; head -c 4M /dev/zero; head -c 2M /dev/urandom; } >$DISK
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

# The scenarios. Each KIND has three parts, all taking the mounted root R:
#   prep KIND R    before the "start" mark (then synced)
#   run KIND R     between the marks: the command whose crash states are checked
#   verdict KIND R DONE   the invariants at a crash point (DONE=1 at the
#                  "done" mark); prints VIOLATION lines, fails if any
# A rerun of `run` from a crash state must converge (checked at a sample
# of points, the "recovery" check) for the kinds listed in RERUN.
RERUN=" copy copysrc syncfile merge mergefile delete linkdest clonedest dedupe resume shard image "

prep() {
    local r=$2
    case $1 in
    merge | mergefile) mkdir -p "$r"/dst && cp -a $W/old/. "$r"/dst/ ;;
    delete) mkdir -p "$r"/dst && cp -a $W/olddel/. "$r"/dst/ ;;
    copysrc) cp -a $W/src "$r"/src ;;
    linkdest | clonedest) cp -a $W/ref "$r"/ref ;;
    dedupe) mkdir "$r"/d && cp -a $W/src "$r"/d/a && cp -a $W/src "$r"/d/b ;;
    resume)
        # A copy killed (SIGKILL) once 40 files are in its staged tree; the
        # scenario is the --resume that finishes it. The first copy flushes
        # each file on one thread (--sync file -j 1), so that it is still
        # running when the count is reached (the default copy of this tree
        # finished before a 50 ms poll saw 80 files).
        $KOPIRU copy -a --sync file -j 1 -T $W/src "$r"/dst >/dev/null 2>&1 &
        local pid=$!
        for _ in $(seq 1200); do
            [ "$(find "$r" -path '*kopiru-tmp*' -type f 2>/dev/null | wc -l)" -ge 40 ] && break
            kill -0 $pid 2>/dev/null || break
            sleep 0.05
        done
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        local staged
        staged=$(find "$r" -path '*kopiru-tmp*' -type f | wc -l)
        if [ "$staged" -gt 0 ]; then
            RESUMED="killed with $staged files staged"
        else
            RESUMED="NOT KILLED: the first copy finished first, so --resume had nothing to finish"
        fi
        ;;
    esac
    sync
}

run() {
    local r=$2
    case $1 in
    unsafe) unsafe_writer $W/src "$r"/dst ;;
    copy | merge) $KOPIRU copy -a -T $W/src "$r"/dst ;;
    big) $KOPIRU copy -a -T $W/big "$r"/dst ;;
    syncfile | mergefile) $KOPIRU copy -a --sync file -T $W/src "$r"/dst ;;
    copysrc) $KOPIRU copy -a -T "$r"/src "$r"/dst ;;
    delete) $KOPIRU copy -a --delete -T $W/src "$r"/dst ;;
    linkdest) $KOPIRU copy -a --link-dest "$r"/ref -T $W/src "$r"/dst ;;
    clonedest) $KOPIRU copy -a --clone-dest "$r"/ref -T $W/src "$r"/dst ;;
    dedupe) $KOPIRU dedupe --no-progress "$r"/d ;;
    resume) $KOPIRU copy -a --resume -T $W/src "$r"/dst ;;
    shard)
        # Two ranks by hand; rank 0 publishes the staged tree.
        $KOPIRU copy -a --shard 0/2 -T $W/src "$r"/dst &
        local p0=$! r1 r0
        $KOPIRU copy -a --shard 1/2 -T $W/src "$r"/dst
        r1=$?
        wait $p0
        r0=$?
        [ $r0 = 0 ] && [ $r1 = 0 ]
        ;;
    image) $KOPIRU image --file --no-progress $DISK "$r"/out.img ;;
    flash) $KOPIRU flash --yes $IMG "$LWDEV" ;;
    esac
}

# The recovery's rerun: the same command, except that an image already in
# place is complete (kopiru image, like cp -n, does not replace it unasked).
rerun() {
    if [ "$1" = image ] && [ -e "$2"/out.img ]; then return 0; fi
    run "$@"
}

labcheck() { # SRC DST [ARGS...]: kopiru-lab check, VIOLATION lines kept
    local out
    out=$($LAB check "$@" 2>&1) && return 0
    echo "$out" | grep VIOLATION || echo "VIOLATION $out"
    return 1
}

verdict() {
    local r=$2 done=$3 c=() x=()
    [ "$done" = 1 ] && c=(--complete) && x=(--exact)
    case $1 in
    unsafe | copy | syncfile | resume | shard) labcheck $W/src "$r"/dst "${c[@]}" ;;
    big) labcheck $W/big "$r"/dst "${c[@]}" ;;
    merge | mergefile) labcheck $W/src "$r"/dst --old $W/old "${c[@]}" ;;
    delete) labcheck $W/src "$r"/dst --old $W/olddel "${x[@]}" ;;
    copysrc)
        labcheck $W/src "$r"/dst "${c[@]}" &&
            { labcheck $W/src "$r"/src --exact || { echo "VIOLATION (the source, on the logged device)"; false; }; }
        ;;
    linkdest | clonedest)
        labcheck $W/src "$r"/dst "${c[@]}" &&
            { labcheck $W/ref "$r"/ref --exact || { echo "VIOLATION (the reference DIR)"; false; }; }
        ;;
    dedupe)
        # Every file keeps its contents at every moment.
        labcheck $W/src "$r"/d/a --exact && labcheck $W/src "$r"/d/b --exact ;;
    image)
        # OUTPUT is absent or the whole image; after exit 0, the whole image.
        if [ -e "$r"/out.img ] || [ "$done" = 1 ]; then
            cmp -s $DISK "$r"/out.img || { echo "VIOLATION out.img: $(stat -c %s "$r"/out.img 2>/dev/null || echo absent), not the image"; false; }
        fi
        ;;
    flash)
        # The device holds the whole image at the done mark; before it,
        # its first MiB is either the old one (zeros) or the image's.
        if [ "$done" = 1 ]; then
            cmp -s -n "$(stat -c %s $IMG)" $IMG "$r" || { echo "VIOLATION the image is not on the device"; false; }
        else
            cmp -s -n 1048576 $IMG "$r" || cmp -s -n 1048576 /dev/zero "$r" ||
                { echo "VIOLATION the first MiB is neither old nor new"; false; }
        fi
        ;;
    esac
}

# scenario NAME FS KIND
scenario() {
    local name=$1 fs=$2 kind=$3 t0=$SECONDS rc s d
    [[ $name =~ $ONLY ]] || return 0
    RESUMED=""
    fresh "$DATA" "$D_DATA" || { echo "FAIL $name: cannot create data device"; return; }
    dmsetup create "$LW" --table "0 $SZ log-writes /dev/mapper/$DATA $D_LOG" ||
        { echo "FAIL $name: cannot create log-writes"; rmdev "$DATA"; return; }
    LWDEV=$(readlink -f /dev/mapper/"$LW")
    if [ "$kind" != flash ]; then
        if ! { mkfs_for "$fs" /dev/mapper/"$LW" && mount_fs "$fs" /dev/mapper/"$LW" "$M"; }; then
            echo "FAIL $name: mkfs/mount $fs"; rmdev "$LW"; rmdev "$DATA"; return
        fi
    fi
    prep "$kind" "$M"
    dmsetup message "$LW" 0 mark start
    run $kind "$M" >"$T"/out 2>&1
    rc=$?
    [ $rc = 0 ] && dmsetup message "$LW" 0 mark "done"
    [ "$kind" != flash ] && umount "$M"
    rmdev "$LW"
    rmdev "$DATA"
    if [ $rc != 0 ]; then
        echo "FAIL $name: command exited $rc: $(tail -n 3 "$T"/out | tr '\n' ' ')"
        return
    fi
    $LAB points "$D_LOG" >"$T"/points || { echo "FAIL $name: cannot read the log"; return; }
    s=$(awk '$5=="start"{print $1}' "$T"/points)
    d=$(awk '$5=="done"{print $1}' "$T"/points)
    # Crash points: every flush/FUA entry strictly between the marks, then
    # the "done" mark itself (exit 0: everything must be there).
    awk -v s="$s" -v d="$d" '$1>s && $1<d && $5=="-"{print $1}' "$T"/points >"$T"/all
    local n
    n=$(wc -l <"$T"/all)
    # Sample at most MAXP of them, evenly, always keeping the last. For
    # every fourth one sampled, also the entry halfway between it and the
    # flush before it (the writes since that flush, half of them applied,
    # in the order they completed) and the entry just before it (all of
    # them, but not the flush).
    awk -v n="$n" -v m="$MAXP" -v s="$s" '
        { a[NR] = $1 }
        END {
            step = int((n + m - 1) / m); if (step < 1) step = 1
            k = 0
            for (i = 1; i <= n; i++) {
                if (n > m && (i - 1) % step != 0 && i != n) continue
                prev = (i > 1) ? a[i - 1] : s
                if (k % 4 == 0 && a[i] - prev > 2) {
                    print int((prev + a[i]) / 2), "mid"
                    if (a[i] - 1 > int((prev + a[i]) / 2)) print a[i] - 1, "before"
                }
                print a[i], "flush"
                k++
            }
        }' "$T"/all >"$T"/sel
    echo "$d done" >>"$T"/sel
    local total
    total=$(wc -l <"$T"/sel)
    # The recovery check (rerun from the crash state): at the middle point.
    local rec=$(((total + 1) / 2))
    [[ $RERUN == *" $kind "* ]] || rec=-1
    local checked=0 mids=0 befores=0 reruns=0 bad=0 last=-1 p tag first_bad="" out done_bad="" idx=0
    fresh "$RP" "$D_RP" || { echo "FAIL $name: cannot create replay device"; return; }
    while read -r p tag; do
        idx=$((idx + 1))
        $LAB replay "$D_LOG" /dev/mapper/"$RP" --from $((last + 1)) --to "$p" 2>/dev/null ||
            { echo "FAIL $name: replay to $p failed"; bad=1; break; }
        last=$p
        dmsetup create "$CK" --table "0 $SZ snapshot /dev/mapper/$RP $D_CK N 8" ||
            { echo "FAIL $name: cannot snapshot the replay"; bad=1; break; }
        checked=$((checked + 1))
        [ "$tag" = mid ] && mids=$((mids + 1))
        [ "$tag" = before ] && befores=$((befores + 1))
        local at="entry $p"
        [ "$tag" = mid ] && at="entry $p (between flushes)"
        [ "$tag" = before ] && at="entry $p (just before a flush)"
        [ "$tag" = "done" ] && at="entry $p (done mark, after exit 0)"
        local isdone=0 root=$C mounted=0
        [ "$tag" = "done" ] && isdone=1
        out=""
        if [ "$kind" = flash ]; then
            root=/dev/mapper/$CK
        elif mount_fs "$fs" /dev/mapper/"$CK" "$C" 2>"$T"/merr; then
            mounted=1
        else
            out="VIOLATION mount failed: $(head -c 200 "$T"/merr)"
        fi
        [ -z "$out" ] && out=$(verdict "$kind" "$root" $isdone)
        # Recovery: the same command run again from this state converges.
        if [ -z "$out" ] && [ $mounted = 1 ] && [ $idx = $rec ]; then
            reruns=$((reruns + 1))
            if ! rerun "$kind" "$root" >"$T"/rerun 2>&1; then
                out="VIOLATION the rerun from this state exited non-zero: $(tail -n 2 "$T"/rerun | tr '\n' ' ')"
            else
                out=$(verdict "$kind" "$root" 1 | sed 's/^VIOLATION /VIOLATION after a rerun: /')
            fi
        fi
        if [ -n "$out" ]; then
            bad=$((bad + 1))
            [ -z "$first_bad" ] &&
                first_bad="$at: $(echo "$out" | grep -c VIOLATION) violations, e.g. $(echo "$out" | head -n 2 | tr '\n' ';')"
            [ $bad = 1 ] && echo "$out" | head -n 3 | sed "s/^/  .. $name $at: /" >&2
            [ "$tag" = "done" ] && done_bad="; at the done mark (after exit 0): $(echo "$out" | grep -c VIOLATION) violations, e.g. $(echo "$out" | head -n 1)"
        fi
        [ $mounted = 1 ] && umount "$C"
        rmdev "$CK"
    done <"$T"/sel
    rmdev "$RP"
    local secs=$((SECONDS - t0)) extra=""
    [ -n "$RESUMED" ] && extra=" ($RESUMED)"
    if [[ $RESUMED == NOT* ]]; then
        echo "FAIL $name: $RESUMED [${secs}s]"
    elif [ "$kind" = unsafe ]; then
        # The self-test: the checker must catch the unsafe writer.
        if [ $bad -gt 0 ]; then
            echo "PASS $name: checker caught the unsafe writer at $bad of $checked crash points (first: $first_bad) [$n flush points, ${secs}s]"
        else
            echo "FAIL $name: checker did not catch the unsafe writer at any of $checked crash points"
        fi
    elif [ $bad -gt 0 ]; then
        echo "FAIL $name: violated at $bad of $checked crash points; first at $first_bad${done_bad} [$n flush points, ${secs}s]"
    else
        echo "PASS $name: $checked crash points checked ($mids halfway between flushes, $befores just before one, + the done mark; of $n flush points between the marks), $reruns reruns converged$extra [${secs}s]"
    fi
}

# fault NAME FS MODE: dm-flakey under the filesystem.
#   error: from 1 s into the copy on, every write fails (EIO). kopiru must
#          exit non-zero naming a path, and after a remount every final
#          name holds nothing or the whole file.
#   drop:  every write is silently dropped (a disk that lies). `copy
#          --verify` must catch it (it reads back past the page cache), and
#          so must `kopiru verify` afterwards, each with a non-zero exit.
fault() {
    local name=$1 fs=$2 mode=$3 t0=$SECONDS rc vrc
    [[ $name =~ $ONLY ]] || return 0
    fresh "$DATA" "$D_DATA" || { echo "FAIL $name: cannot create data device"; return; }
    local ok="0 $SZ flakey /dev/mapper/$DATA 0 1000 0"
    dmsetup create "$FL" --table "$ok" || { echo "FAIL $name: cannot create flakey"; rmdev "$DATA"; return; }
    if ! { mkfs_for "$fs" /dev/mapper/"$FL" && mount_fs "$fs" /dev/mapper/"$FL" "$M"; }; then
        echo "FAIL $name: mkfs/mount $fs"; rmdev "$FL"; rmdev "$DATA"; return
    fi
    sync
    local bad_table
    case $mode in
    error) bad_table="0 $SZ flakey /dev/mapper/$DATA 0 1 1000 1 error_writes" ;;
    drop) bad_table="0 $SZ flakey /dev/mapper/$DATA 0 0 1000 1 drop_writes" ;;
    esac
    if ! { dmsetup reload "$FL" --table "$bad_table" && dmsetup suspend "$FL" && dmsetup resume "$FL"; }; then
        echo "FAIL $name: cannot load the faulty table"; umount "$M"; rmdev "$FL"; rmdev "$DATA"; return
    fi
    local res=""
    case $mode in
    error)
        # The table is up for its first second: the copy must start after
        # it, or on a fast host it can finish before any write fails.
        sleep 1.5
        $KOPIRU copy -a -T $W/src "$M"/dst >"$T"/out 2>&1
        rc=$?
        umount "$M" 2>/dev/null || umount -l "$M"
        dmsetup reload "$FL" --table "$ok" && dmsetup suspend "$FL" && dmsetup resume "$FL"
        if [ $rc = 0 ]; then
            res="FAIL $name: exit 0 though writes failed"
        elif ! grep -q "$M/dst" "$T"/out; then
            res="FAIL $name: exit $rc, but no path named: $(head -n 2 "$T"/out | tr '\n' ' ')"
        elif ! mount_fs "$fs" /dev/mapper/"$FL" "$M" 2>"$T"/merr; then
            res="FAIL $name: remount failed: $(head -c 200 "$T"/merr)"
        else
            local v
            v=$(labcheck $W/src "$M"/dst)
            if [ -n "$v" ]; then
                res="FAIL $name: after the errors, a final name is wrong: $(echo "$v" | head -n 2 | tr '\n' ';')"
            else
                res="PASS $name: exit $rc, '$(grep -m1 "$M/dst" "$T"/out | cut -c1-150)'; every final name whole after a remount [$((SECONDS - t0))s]"
            fi
            umount "$M"
        fi
        ;;
    drop)
        $KOPIRU copy -a --verify -T $W/src "$M"/dst >"$T"/out 2>&1
        rc=$?
        $KOPIRU verify $W/src "$M"/dst >"$T"/vout 2>&1
        vrc=$?
        umount "$M" 2>/dev/null || umount -l "$M"
        if [ $rc = 0 ]; then
            res="FAIL $name: copy --verify exited 0 though every write was dropped"
        elif [ $vrc = 0 ]; then
            res="FAIL $name: kopiru verify exited 0 though every write was dropped"
        else
            res="PASS $name: copy --verify exit $rc ('$(head -n 1 "$T"/out | cut -c1-120)'), kopiru verify exit $vrc ('$(head -n 1 "$T"/vout | cut -c1-120)') [$((SECONDS - t0))s]"
        fi
        ;;
    esac
    echo "$res"
    rmdev "$FL"
    rmdev "$DATA"
}

# nfs NAME: the kernel's NFS server on loopback, exporting XFS (reflink),
# mounted with vers=4.2 (issue 29). A 256 MiB file copied by kopiru within
# the share must be copied by the server (NFS CLONE or COPY: the mount's
# READ and WRITE counts in /proc/self/mountstats stay flat) and equal; a
# tree copied onto the share must be exact, and still exact after an
# unmount and a mount (close-to-open: what the client said was written is
# on the server). A copy on the local XFS must not be timed as a share.
nfs() {
    local name=$1 t0=$SECONDS E=$W/export N=$W/nfs
    [[ $name =~ $ONLY ]] || return 0
    modprobe -a nfsd nfs nfsv4 2>/dev/null
    if ! grep -q '^nfsd ' /proc/modules || ! command -v rpc.nfsd >/dev/null; then
        echo "SKIP $name: no nfsd module or no rpc.nfsd (nfs-kernel-server) here"
        return
    fi
    fresh "$DATA" "$D_DATA" || { echo "FAIL $name: cannot create data device"; return; }
    mkdir -p $E $N
    if ! { mkfs_for xfs /dev/mapper/"$DATA" && mount_fs xfs /dev/mapper/"$DATA" $E; }; then
        echo "FAIL $name: mkfs/mount xfs"; rmdev "$DATA"; return
    fi
    # The host's /var/lib/nfs is read-only here: the server's state on tmpfs.
    mount -t tmpfs tmpfs /var/lib/nfs 2>/dev/null
    mkdir -p /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery
    touch /var/lib/nfs/etab /var/lib/nfs/rmtab
    mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
    mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs 2>/dev/null
    rpcbind -w 2>/dev/null
    rpc.mountd --no-nfs-version 3 2>"$T"/nfs-err
    exportfs -o rw,no_root_squash,no_subtree_check,insecure,fsid=0 127.0.0.1:$E 2>>"$T"/nfs-err
    rpc.nfsd -N 3 4 2>>"$T"/nfs-err
    echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null
    if ! mount -t nfs -o vers=4.2 127.0.0.1:/ $N 2>>"$T"/nfs-err; then
        echo "SKIP $name: the NFS server did not come up: $(tail -n 2 "$T"/nfs-err | tr '\n' ' ')"
        umount $E; rmdev "$DATA"
        return
    fi
    local res="" ops0 ops1 reads writes
    head -c $((256 << 20)) /dev/urandom >$E/big
    # Per-operation counts of this mount: "OP: ops trans timeouts ...".
    ops() { awk -v m=" $N " -v op="$1:" '$0 ~ "device .* mounted on" {on = index($0, m) > 0} on && $1 == op {print $2; exit}' /proc/self/mountstats; }
    ops0="$(ops READ) $(ops WRITE) $(ops CLONE) $(ops COPY)"
    $KOPIRU copy --json $N/big $N/big2 >"$T"/out 2>&1
    local rc=$?
    ops1="$(ops READ) $(ops WRITE) $(ops CLONE) $(ops COPY)"
    local methods
    methods=$(grep -o '"clone":[0-9]*\|"offload":[0-9]*\|"stream":[0-9]*' "$T"/out | tr '\n' ' ')
    read -r r0 w0 c0 y0 <<<"$ops0"
    read -r r1 w1 c1 y1 <<<"$ops1"
    reads=$((r1 - r0)) writes=$((w1 - w0))
    if [ $rc != 0 ]; then
        res="FAIL $name: copy within the share exited $rc: $(head -c 200 "$T"/out)"
    elif ! cmp -s $E/big $E/big2; then
        res="FAIL $name: the copy differs from the file"
    elif [ $reads -gt 2 ] || [ $writes -gt 2 ]; then
        res="FAIL $name: the data crossed the network: $reads READs, $writes WRITEs for 256 MiB"
    elif ! grep -q '"server_side_files":1[,}]' "$T"/out; then
        res="FAIL $name: --json does not count the server's copy: $(head -c 300 "$T"/out)"
    elif ! $KOPIRU copy --explain $N/big $N/big3 2>&1 | grep -q '^server-side on nfs: 1 files cloned or copied by the server'; then
        res="FAIL $name: --explain does not say the server copied it"
    elif ! $KOPIRU copy --json $W/src $E/local 2>&1 | grep -q '"round_trip_filesystem":null'; then
        # The timed creates (tree/latency.rs) must not take the emulated
        # kernel's slower local creates for a share's round trips.
        res="FAIL $name: a copy on the local XFS was taken for a share"
    else
        local how="CLONE $((c1 - c0)), COPY $((y1 - y0))"
        # A tree onto the share, exact, and exact again after a remount.
        $KOPIRU copy -a $W/src $N/tree >"$T"/out 2>&1
        rc=$?
        local v1=0 v2=0
        $KOPIRU verify $W/src $N/tree >"$T"/v1 2>&1 || v1=$?
        umount $N && mount -t nfs -o vers=4.2 127.0.0.1:/ $N
        $KOPIRU verify $W/src $N/tree >"$T"/v2 2>&1 || v2=$?
        if [ $rc != 0 ]; then
            res="FAIL $name: tree onto the share exited $rc: $(head -c 200 "$T"/out)"
        elif [ $v1 != 0 ] || [ $v2 != 0 ]; then
            res="FAIL $name: the tree on the share is not exact (verify $v1, after a remount $v2): $(head -c 200 "$T"/v1) $(head -c 200 "$T"/v2)"
        else
            res="PASS $name: 256 MiB copied by the server ($how; $reads READs, $writes WRITEs; kopiru --json: ${methods% }), a tree exact on the share and after a remount [$((SECONDS - t0))s]"
        fi
    fi
    echo "$res"
    umount $N 2>/dev/null || umount -l $N
    rpc.nfsd 0 2>/dev/null
    exportfs -ua 2>/dev/null
    umount $E 2>/dev/null || umount -l $E
    rmdev "$DATA"
}

# smb NAME: Samba on loopback sharing XFS, mounted by the kernel's cifs
# client with SMB 3.1.1 (issue 29). A 256 MiB file copied by kopiru within
# the share must be copied by the server (copy_file_range is sent as
# FSCTL_SRV_COPYCHUNK: the bytes the mount read and wrote, in
# /proc/fs/cifs/Stats, stay flat) and equal; a tree copied onto the share
# must be equal, and still equal after an unmount and a mount.
smb() {
    local name=$1 t0=$SECONDS E=$W/smbshare N=$W/smb S=$W/samba
    [[ $name =~ $ONLY ]] || return 0
    modprobe cifs 2>/dev/null
    if ! grep -q '^cifs ' /proc/modules || ! command -v smbd >/dev/null ||
        ! command -v mount.cifs >/dev/null; then
        echo "SKIP $name: no cifs module, smbd (samba) or mount.cifs (cifs-utils) here"
        return
    fi
    fresh "$DATA" "$D_DATA" || { echo "FAIL $name: cannot create data device"; return; }
    mkdir -p $E $N $S/lock $S/state $S/cache $S/private $S/pid $S/ncalrpc
    if ! { mkfs_for xfs /dev/mapper/"$DATA" && mount_fs xfs /dev/mapper/"$DATA" $E; }; then
        echo "FAIL $name: mkfs/mount xfs"; rmdev "$DATA"; return
    fi
    # Every path of the server's own in $S: the host's /var is read-only.
    cat >$S/smb.conf <<CONF
[global]
server role = standalone server
map to guest = Bad User
server min protocol = SMB3
interfaces = lo
bind interfaces only = yes
disable netbios = yes
smb ports = 445
lock directory = $S/lock
state directory = $S/state
cache directory = $S/cache
private dir = $S/private
pid directory = $S/pid
ncalrpc dir = $S/ncalrpc
log file = $S/log
[share]
path = $E
read only = no
guest ok = yes
force user = root
CONF
    # Without --no-process-group smbd makes a session of its own: stopping,
    # it signals its whole process group, which must not be this script.
    smbd --foreground -s $S/smb.conf </dev/null >$S/out 2>&1 &
    local smbd=$! up=""
    for _ in $(seq 60); do
        mount -t cifs //127.0.0.1/share $N -o guest,vers=3.1.1 2>"$T"/smb-err && { up=1; break; }
        sleep 0.5
    done
    if [ -z "$up" ]; then
        echo "SKIP $name: Samba did not come up: $(tail -n 2 "$T"/smb-err $S/out | tr '\n' ' ')"
        kill -- -$smbd 2>/dev/null; wait $smbd 2>/dev/null
        umount $E; rmdev "$DATA"
        return
    fi
    local res="" b0 b1 moved
    head -c $((256 << 20)) /dev/urandom >$E/big
    # Bytes the client read and wrote over SMB, all shares together.
    bytes() { awk '/Bytes read:/ {n += $3 + $6} END {print n + 0}' /proc/fs/cifs/Stats; }
    b0=$(bytes)
    $KOPIRU copy --json $N/big $N/big2 >"$T"/out 2>&1
    local rc=$?
    b1=$(bytes)
    moved=$((b1 - b0))
    local methods
    methods=$(grep -o '"clone":[0-9]*\|"offload":[0-9]*\|"stream":[0-9]*\|"server_side_files":[0-9]*' "$T"/out | tr '\n' ' ')
    if [ $rc != 0 ]; then
        res="FAIL $name: copy within the share exited $rc: $(head -c 200 "$T"/out)"
    elif ! cmp -s $E/big $E/big2; then
        res="FAIL $name: the copy differs from the file"
    elif [ $moved -gt $((4 << 20)) ]; then
        res="FAIL $name: the data crossed the network: $moved bytes read and written for 256 MiB ($methods)"
    elif ! grep -q '"server_side_files":1[,}]' "$T"/out; then
        res="FAIL $name: --json does not count the server's copy: $(head -c 300 "$T"/out)"
    else
        $KOPIRU copy $W/src $N/tree >"$T"/out 2>&1
        rc=$?
        # The counters must see the tree's bytes written, else the flat
        # count above proves nothing.
        local wrote=$(($(bytes) - b1)) d1=0 d2=0
        diff -r $W/src $N/tree >"$T"/d1 2>&1 || d1=1
        umount $N && mount -t cifs //127.0.0.1/share $N -o guest,vers=3.1.1
        diff -r $W/src $N/tree >"$T"/d2 2>&1 || d2=1
        if [ $rc != 0 ]; then
            res="FAIL $name: tree onto the share exited $rc: $(head -c 200 "$T"/out)"
        elif [ $wrote -lt $((1 << 20)) ]; then
            res="FAIL $name: /proc/fs/cifs/Stats counted $wrote bytes for the tree: its counters are not read right"
        elif [ $d1 != 0 ] || [ $d2 != 0 ]; then
            res="FAIL $name: the tree on the share differs (before $d1, after a remount $d2): $(head -c 200 "$T"/d1) $(head -c 200 "$T"/d2)"
        else
            res="PASS $name: 256 MiB copied by the server ($moved bytes crossed, against $wrote for the tree; kopiru --json: ${methods% }), a tree equal on the share and after a remount [$((SECONDS - t0))s]"
        fi
    fi
    echo "$res"
    umount $N 2>/dev/null || umount -l $N
    kill -- -$smbd 2>/dev/null || kill $smbd 2>/dev/null
    wait $smbd 2>/dev/null
    umount $E 2>/dev/null || umount -l $E
    rmdev "$DATA"
}

# lane N: the devices, device-mapper names and directories of one of two
# lanes of scenarios. The guest has two vCPUs and eight disks, four per
# lane: the lanes run side by side, each its scenarios one after another.
lane() {
    local n=$1 disks=(vda vdb vdc vdd vde vdf vdg vdh)
    D_DATA=/dev/${disks[4 * n]} D_LOG=/dev/${disks[4 * n + 1]}
    D_RP=/dev/${disks[4 * n + 2]} D_CK=/dev/${disks[4 * n + 3]}
    DATA=data$n LW=lw$n RP=rp$n CK=ck$n FL=fl$n
    M=$W/mnt$n C=$W/ck$n T=$W/tmp$n
    mkdir -p "$M" "$C" "$T"
}

lane0() {
    lane 0
    scenario selftest-unsafe-ext4 ext4 unsafe
    scenario mergefile-btrfs btrfs mergefile
    scenario copysrc-ext4 ext4 copysrc
    scenario syncfile-ext4 ext4 syncfile
    scenario merge-ext4 ext4 merge
    scenario merge-xfs xfs merge
    scenario big-btrfs btrfs big
    scenario delete-xfs xfs delete
    scenario clonedest-xfs xfs clonedest
    scenario dedupe-xfs xfs dedupe
    scenario shard-ext4 ext4 shard
    scenario flash-raw raw flash
    fault flakey-error-xfs xfs error
}

lane1() {
    lane 1
    scenario copy-btrfs btrfs copy
    scenario merge-btrfs btrfs merge
    scenario syncfile-btrfs btrfs syncfile
    scenario copy-xfs xfs copy
    scenario syncfile-xfs xfs syncfile
    scenario mergefile-ext4 ext4 mergefile
    scenario big-ext4 ext4 big
    scenario delete-ext4 ext4 delete
    scenario linkdest-ext4 ext4 linkdest
    scenario clonedest-btrfs btrfs clonedest
    scenario dedupe-btrfs btrfs dedupe
    scenario resume-ext4 ext4 resume
    scenario image-ext4 ext4 image
    fault flakey-error-ext4 ext4 error
    fault flakey-drop-ext4 ext4 drop
}

if [ -b /dev/vdh ] && [ "$(nproc)" -ge 2 ]; then
    lane0 &
    lane1
    wait
else
    log "one lane (fewer than 8 disks or 2 CPUs)"
    lane0
    lane1
fi
# Alone, once both lanes are done (the server takes a CPU of its own).
lane 0
nfs nfs-xfs
smb smb-xfs
dmsetup remove zero0
echo "GUEST DONE"
