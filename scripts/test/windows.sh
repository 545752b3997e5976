#!/usr/bin/env bash
# End-to-end checks of the Windows build of kopiru, run under Wine.
#
# Builds kopiru.exe for x86_64-pc-windows-gnu (mingw), builds the
# bcryptprimitives.dll shim Wine 8 needs (tests/windows/processprng.c), and
# runs `kopiru.exe copy`/`verify` under wine64 on trees under /tmp (Wine's
# Z: drive is /), checking the results from the Linux side. What Wine cannot
# do is skipped LOUDLY ("!!!!!!!! SKIPPED: reason") and counted as skipped,
# never as passed. Ends with "N passed, N failed, N skipped"; exits 1 on any
# failure.
#
# Needs gcc-mingw-w64-x86-64 and wine64 (installed with apt-get when run as
# root and missing) and rustup's x86_64-pc-windows-gnu target (added).
# Wine runs one session for the whole script (scripts/lib.sh, wine_session_start):
# the run's own copy of a prefix made once, one persistent wineserver,
# stopped at the end.
# Environment: CARGO_TARGET_DIR (as cargo), KOPIRU_WINEPREFIX (the prefix
# copied, default /tmp/kopiru-wineprefix, kept between runs: making it
# takes ~15 s).
set -u
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1

# The checks below, by name: all skipped when Wine cannot be had.
ALL_CHECKS=(starts tree close-pool long-path attributes times same-file into-itself
    one-failure resume two-at-once verify hard-links rerun not-supported method-clone copyfile2
    bench-sweep unit-tests rename-by-handle archive security streams sparse junctions)

CC=x86_64-w64-mingw32-gcc

# --- set-up -----------------------------------------------------------------
need "$CC" gcc-mingw-w64-x86-64
need "$WINE" wine64
install_missing
if ! command -v "$CC" >/dev/null || [ ! -x "$WINE" ]; then
    for c in "${ALL_CHECKS[@]}"; do
        skip "$c: mingw ($CC) or Wine ($WINE) is not installed and cannot be"
    done
    finish
fi
if command -v rustup >/dev/null; then
    rustup target list --installed | grep -qx x86_64-pc-windows-gnu ||
        rustup target add x86_64-pc-windows-gnu >/dev/null
fi

echo "building kopiru.exe (x86_64-pc-windows-gnu)"
if ! cargo build -q -p kopiru-cli --target x86_64-pc-windows-gnu; then
    fail "cargo build --target x86_64-pc-windows-gnu"
    finish
fi
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
EXE=$TARGET_DIR/x86_64-pc-windows-gnu/debug/kopiru.exe

WORK=$(mktemp -d /tmp/kopiru-wine.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
BIN=$WORK/bin
mkdir -p "$BIN"
cp "$EXE" "$BIN/"
if ! "$CC" -shared -O2 -o "$BIN/bcryptprimitives.dll" \
    tests/windows/processprng.c -ladvapi32; then
    fail "building the ProcessPrng shim"
    finish
fi

trap 'wine_session_end; rm -rf "$WORK"' EXIT
if ! wine_session_start; then
    fail "starting Wine (wine_session_start, scripts/lib.sh)"
    finish
fi

# A Linux path as Wine sees it on Z:.
winpath() { local p=${1//\//\\}; printf 'Z:%s' "$p"; }

OUT=$WORK/out
ERR=$WORK/err
# Runs kopiru.exe with Linux paths turned into Z: paths where an argument
# starts with /; sets RC, and leaves stdout and stderr in $OUT and $ERR.
k() {
    local args=() a
    for a in "$@"; do
        case $a in
        /*) args+=("$(winpath "$a")") ;;
        *) args+=("$a") ;;
        esac
    done
    "$WINE" "$BIN/kopiru.exe" "${args[@]}" >"$OUT" 2>"$ERR" </dev/null
    RC=$?
}
show() { echo "  exit $RC; stdout: $(head -c 600 "$OUT"); stderr: $(head -c 600 "$ERR")"; }

# Windows attributes of a Linux path, as `attrib` prints them ("A  HR");
# what Wine said on stderr is left in $WORK/attrib.err.
attrs() {
    "$WINE" cmd /c attrib "$(winpath "$1")" 2>"$WORK/attrib.err" | tr -d '\r' | head -1 |
        cut -c1-12
}

# A tree to interrupt a copy of: DIRS directories of FILES small files
# each, and a 20 MB file, under ROOT/src.
interruptible_tree() {
    local root=$1 dirs=$2 files=$3 d f
    mkdir -p "$root/src"
    for d in $(seq 1 "$dirs"); do
        mkdir "$root/src/d$d"
        for f in $(seq 1 "$files"); do echo "file $d $f" >"$root/src/d$d/f$f"; done
    done
    head -c 20000000 /dev/urandom >"$root/src/big"
}
# Waits until process PID has stopped (SIGSTOP takes effect soon, not at
# once); returns 1 if it has ended instead.
is_stopped() {
    local state
    for _ in $(seq 1 5000); do
        state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
        case $state in
        T) return 0 ;;
        Z | X | "") return 1 ;;
        esac
        sleep 0.001
    done
    return 1
}
# Lets process PID run in slices of a few milliseconds, stopped (SIGSTOP)
# between them, until N files exist under ROOT outside ROOT/src, and
# leaves it stopped there. Watched while it runs, a copy could end between
# two looks (a warm Wine copies these trees in a fraction of a second);
# stopped while it is looked at, it cannot. Returns 1 if it ended first
# (or after 20000 slices).
stop_at_files() {
    local root=$1 n=$2 pid=$3 have
    for _ in $(seq 1 20000); do
        kill -STOP "$pid" 2>/dev/null && is_stopped "$pid" || return 1
        have=$(find "$root" -path "$root/src" -prune -o -type f -print 2>/dev/null | wc -l)
        [ "$have" -ge "$n" ] && return 0
        kill -CONT "$pid"
        sleep 0.002
    done
    return 1
}

# Modification time with nanoseconds, and access time.
mtime() { stat -c %.9Y "$1"; }
atime() { stat -c %.9X "$1"; }
# A time truncated to 100 ns, as NTFS (and Wine's FILETIME) keeps it.
to100ns() { local t=$1; printf '%s00' "${t%??}"; }

# --- checks -----------------------------------------------------------------
T=$WORK/t
mkdir -p "$T"

# starts: the shim lets Rust's std start under Wine 8 (first start makes the
# prefix).
k --version
if [ $RC -eq 0 ] && grep -q '^kopiru ' "$OUT"; then
    pass "starts: kopiru.exe --version under $("$WINE" --version 2>/dev/null)"
else
    fail "starts: kopiru.exe --version"
    show
    finish
fi

# tree: files, directories, empty ones, names with spaces and non-ASCII
# characters, a file of 3 MiB.
S=$T/tree-src
mkdir -p "$S/sub dir/deeper" "$S/empty dir" "$S/naïve café" "$S/日本語"
echo hello >"$S/a.txt"
: >"$S/empty"
head -c 3145728 /dev/urandom >"$S/sub dir/big.bin"
echo x >"$S/sub dir/deeper/with space.txt"
echo y >"$S/naïve café/ünï cödé ✓.txt"
echo z >"$S/日本語/ファイル.txt"
k copy "$S" "$T/tree-dst"
if [ $RC -eq 0 ] && diff -r "$S" "$T/tree-dst" >/dev/null &&
    [ -d "$T/tree-dst/empty dir" ]; then
    pass "tree: files, directories, spaces and non-ASCII names, identical (diff -r)"
else
    fail "tree"
    show
    diff -r "$S" "$T/tree-dst" | head -5
fi

# close-pool: many small files, whose handles are closed on the pool of
# closer threads (more files than its threads and queue hold), into a new
# tree (staged, renamed into place once every handle is closed) with
# --sync file, and into an existing directory (each file renamed while the
# pool may still hold its handle) with --sync end.
C=$T/pool-src
for d in 1 2 3; do
    mkdir -p "$C/d$d"
    for i in $(seq 1 200); do echo "file $d/$i" >"$C/d$d/f$i.txt"; done
done
k copy --sync file "$C" "$T/pool-new"
rc1=$RC
mkdir -p "$T/pool-into"
k copy --sync end "$C/d1" "$C/d2" "$C/d3" "$T/pool-into"
rc2=$RC
left=$(find "$T/pool-new" "$T/pool-into" -name '.kopiru-tmp*' | wc -l)
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$left" -eq 0 ] &&
    diff -r "$C" "$T/pool-new" >/dev/null && diff -r "$C" "$T/pool-into" >/dev/null; then
    pass "close-pool: 600 files closed on the closer threads, a new tree (--sync file) and into a directory (--sync end) identical, no temporaries"
else
    fail "close-pool: exit $rc1 and $rc2, temporaries left $left"
    show
fi

# long-path: a file whose Windows path is longer than 260 characters.
L=$T/long-src/$(printf 'd%.0s' {1..90})/$(printf 'e%.0s' {1..90})/$(printf 'f%.0s' {1..90})
mkdir -p "$L"
echo deep >"$L/file.txt"
k copy "$T/long-src" "$T/long-dst"
long=$(find "$T/long-dst" -name file.txt)
len=$(winpath "$long" | wc -c)
if [ $RC -eq 0 ] && [ "$len" -gt 260 ] && diff -r "$T/long-src" "$T/long-dst" >/dev/null; then
    pass "long-path: a file at a $len-character path copied"
else
    fail "long-path ($len characters)"
    show
fi

# attributes: read-only and hidden kept (Wine maps read-only to the Unix
# write bits and keeps hidden in the user.DOSATTRIB xattr).
A=$T/attr-src
mkdir -p "$A"
echo r >"$A/readonly"
echo h >"$A/hidden"
echo b >"$A/both"
echo p >"$A/plain"
for f in readonly both; do "$WINE" cmd /c attrib +r "$(winpath "$A/$f")" >/dev/null 2>&1; done
for f in hidden both; do "$WINE" cmd /c attrib +h "$(winpath "$A/$f")" >/dev/null 2>&1; done
if [[ $(attrs "$A/both") != *H*R* ]]; then
    fail "attributes: could not set them with attrib ($(attrs "$A/both"))"
else
    k copy "$A" "$T/attr-dst"
    bad=
    for f in readonly hidden both plain; do
        want=$(attrs "$A/$f" | tr -d ' A')
        printed=$(attrs "$T/attr-dst/$f")
        got=$(printf '%s' "$printed" | tr -d ' A')
        [ "$want" = "$got" ] ||
            bad+=" $f: want '$want', got '$got' (attrib printed '$printed', stderr '$(head -c 300 "$WORK/attrib.err" | tr -d '\r' | tr '\n' ' ')'; mode $(stat -c %A "$T/attr-dst/$f"));"
    done
    if [ $RC -eq 0 ] && [ -z "$bad" ]; then
        pass "attributes: read-only and hidden kept (attrib)"
    else
        fail "attributes:$bad"
        show
    fi
fi

# times: modification and access times of files and directories, to 100 ns.
M=$T/times-src
mkdir -p "$M/dir"
echo t >"$M/dir/f"
touch -m -d "2019-05-06 07:08:09.123456789" "$M/dir/f"
touch -a -d "2018-01-02 03:04:05.987654321" "$M/dir/f"
touch -d "2017-03-04 05:06:07.555555555" "$M/dir"
want_f=$(to100ns "$(mtime "$M/dir/f")")
want_fa=$(to100ns "$(atime "$M/dir/f")")
want_d=$(to100ns "$(mtime "$M/dir")")
k copy "$M" "$T/times-dst"
got_f=$(mtime "$T/times-dst/dir/f")
got_fa=$(atime "$T/times-dst/dir/f")
got_d=$(mtime "$T/times-dst/dir")
if [ $RC -eq 0 ] && [ "$got_f" = "$want_f" ] && [ "$got_fa" = "$want_fa" ] &&
    [ "$got_d" = "$want_d" ]; then
    pass "times: file mtime $got_f, atime $got_fa, directory mtime $got_d (100 ns)"
else
    fail "times: file mtime $got_f (want $want_f), atime $got_fa (want $want_fa), dir $got_d (want $want_d)"
    show
fi
skip "times: creation time (Linux cannot set a birth time; Wine does not keep one)"
skip "times: the source's access time left alone while reading (Wine ignores SetFileTime(-1))"

# same-file: a file onto itself is refused, exit 1, nothing changed.
Q=$T/same
mkdir -p "$Q/d/sub"
echo keep >"$Q/d/f"
before=$(cd "$Q" && find . -printf '%p %s %T@\n' | sort | md5sum)
k copy "$Q/d/f" "$Q/d/f"
rc1=$RC
grep -q "same file" "$ERR"
g1=$?
k copy "$Q/d/sub/../f" "$Q/d/f"
rc2=$RC
after=$(cd "$Q" && find . -printf '%p %s %T@\n' | sort | md5sum)
if [ $rc1 -eq 1 ] && [ $g1 -eq 0 ] && [ $rc2 -eq 1 ] && [ "$before" = "$after" ]; then
    pass "same-file: a file onto itself (by its name and through ..) refused, exit 1"
else
    fail "same-file: exits $rc1 and $rc2, tree unchanged: $([ "$before" = "$after" ] && echo yes || echo no)"
    show
fi

# into-itself: a directory into itself, or onto itself with -T, refused.
k copy "$Q/d" "$Q/d/sub"
rc1=$RC
grep -q "into itself" "$ERR"
g1=$?
k copy -T "$Q/d" "$Q/d"
rc2=$RC
after=$(cd "$Q" && find . -printf '%p %s %T@\n' | sort | md5sum)
if [ $rc1 -eq 1 ] && [ $g1 -eq 0 ] && [ $rc2 -eq 1 ] && [ "$before" = "$after" ]; then
    pass "into-itself: a directory into itself and onto itself refused, exit 1"
else
    fail "into-itself: exits $rc1 and $rc2, tree unchanged: $([ "$before" = "$after" ] && echo yes || echo no)"
    show
fi

# one-failure: one file cannot be placed (a directory is in the way): it is
# named (with single backslashes: Windows paths print as they are), the
# others are copied, exit 23.
F=$T/fail
mkdir -p "$F/src" "$F/dst/b"
for f in a b c; do echo $f >"$F/src/$f"; done
echo x >"$F/dst/b/inner"
k copy "$F/src/." "$F/dst"
if [ $RC -eq 23 ] && grep -q 'dst\\b' "$ERR" && ! grep -q 'dst\\\\b' "$ERR" &&
    cmp -s "$F/src/a" "$F/dst/a" &&
    cmp -s "$F/src/c" "$F/dst/c" && [ -f "$F/dst/b/inner" ]; then
    pass "one-failure: exit 23, the file named (single backslashes), the others copied"
else
    fail "one-failure"
    show
fi

# resume: kill -9 during a copy, then the same command with --resume makes
# an exact copy, leaves no temporaries, and a second --resume copies nothing.
R=$T/resume
interruptible_tree "$R" 12 80
"$WINE" "$BIN/kopiru.exe" copy --sync none -T "$(winpath "$R/src")" "$(winpath "$R/dst")" \
    >/dev/null 2>&1 </dev/null &
pid=$!
# Kill once the copy is under way: a staged tree with files in it.
if stop_at_files "$R" 100 $pid && kill -9 $pid 2>/dev/null; then
    wait $pid 2>/dev/null
    partial=$(find "$R" -path "$R/src" -prune -o -type f -print | wc -l)
    k copy --resume --sync none -T "$R/src" "$R/dst"
    rc1=$RC
    left=$(find "$R" -name '.kopiru-tmp*' | wc -l)
    k copy --resume --sync none --json -T "$R/src" "$R/dst"
    if [ $rc1 -eq 0 ] && diff -r "$R/src" "$R/dst" >/dev/null && [ "$left" -eq 0 ] &&
        [ $RC -eq 0 ] && grep -q '"files":0' "$OUT"; then
        pass "resume: killed with $partial files written, --resume finished it exactly, no temporaries left, a second --resume copied nothing"
    else
        fail "resume: exit $rc1, temporaries left $left"
        show
    fi
else
    wait $pid
    fail "resume: the copy finished before it could be killed (make the tree larger)"
fi

# two-at-once: a run stopped (SIGSTOP) while it builds its staged tree; the
# same command started meanwhile finds that tree locked (a named event,
# Windows' stand-in for flock), refuses (exit 1) and touches nothing; the
# first, continued, makes an exact copy.
A=$T/two
interruptible_tree "$A" 8 60
"$WINE" "$BIN/kopiru.exe" copy --sync none "$(winpath "$A/src")" "$(winpath "$A/dst")" \
    >"$WORK/first.out" 2>&1 </dev/null &
pid=$!
if stop_at_files "$A" 50 $pid; then
    staged=$(find "$A" -maxdepth 1 -name '.kopiru-tmp.tree.*' | wc -l)
    k copy --sync none "$A/src" "$A/dst"
    rc2=$RC
    kill -CONT $pid
    wait $pid
    rc1=$?
    if [ "$staged" -eq 1 ] && [ $rc2 -eq 1 ] && grep -q 'another kopiru is copying' "$ERR" &&
        [ $rc1 -eq 0 ] && diff -r "$A/src" "$A/dst" >/dev/null &&
        [ "$(find "$A" -name '.kopiru-tmp*' | wc -l)" -eq 0 ]; then
        pass "two-at-once: the second run refused (exit 1) while the first held its staged tree; the first finished exactly"
    else
        fail "two-at-once: staged trees $staged, second exit $rc2, first exit $rc1 ($(head -c 300 "$WORK/first.out"))"
        show
    fi
else
    wait $pid
    fail "two-at-once: the first copy finished before it could be stopped (make the tree larger)"
fi

# verify: copy --verify reads the copy back; kopiru verify finds a change.
V=$T/verify
mkdir -p "$V/src/sub"
for f in 1 2 3; do head -c 100000 /dev/urandom >"$V/src/sub/f$f"; done
k copy --verify --json "$V/src" "$V/dst"
rc1=$RC
grep -q '"verified_files":3' "$OUT"
g1=$?
# A local drive is not taken for a share (sys::remote_share).
grep -q '"round_trip_filesystem":null' "$OUT"
l1=$?
k verify "$V/src" "$V/dst"
rc2=$RC
printf 'X' | dd of="$V/dst/sub/f2" bs=1 seek=5000 conv=notrunc status=none
k verify "$V/src" "$V/dst"
rc3=$RC
if [ $rc1 -eq 0 ] && [ $g1 -eq 0 ] && [ $l1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 1 ] &&
    cat "$OUT" "$ERR" | grep -q f2; then
    pass "verify: copy --verify checked 3 files (a local drive, not a share); verify exits 0 on the copy and 1 naming a changed byte"
else
    fail "verify: copy --verify exit $rc1 (verified 3: $([ $g1 -eq 0 ] && echo yes || echo no), taken for a share: $([ $l1 -eq 0 ] && echo no || echo yes)), verify $rc2, after a change $rc3"
    show
fi

# hard-links: two names of one file stay one file (CreateHardLinkW).
H=$T/hard
mkdir -p "$H/src"
echo one >"$H/src/a"
ln "$H/src/a" "$H/src/b"
k copy "$H/src" "$H/dst"
if [ $RC -eq 0 ] && [ "$(stat -c %i "$H/dst/a")" = "$(stat -c %i "$H/dst/b")" ] &&
    cmp -s "$H/src/a" "$H/dst/a"; then
    pass "hard-links: two names of one file copied as one file with two names"
else
    fail "hard-links"
    show
fi

# rerun: the same command run again onto the finished copy copies nothing
# (neither nests nor merges over the copy) and warns; -T updates it.
N=$T/rerun
mkdir -p "$N/src/d"
echo one >"$N/src/f"
k copy "$N/src" "$N/dst"
rc1=$RC
echo two >"$N/src/d/g"
k copy "$N/src" "$N/dst"
rc2=$RC
warned=no
grep -q "is the copy of" "$ERR" && warned=yes
k copy -T "$N/src" "$N/dst"
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $warned = yes ] && [ $RC -eq 0 ] && [ ! -e "$N/dst/src" ] && diff -r "$N/src" "$N/dst" >/dev/null; then
    pass "rerun: the same command again copied nothing and said so (recorded under %LOCALAPPDATA%), -T updated the copy, never nested"
else
    fail "rerun: exits $rc1, $rc2 (warned: $warned) and -T $RC, nested: $([ -e "$N/dst/src" ] && echo yes || echo no)"
    show
fi

# not-supported: flash, dedupe and bench fsync say so, exit 2.
bad=
for cmd in "flash img.raw target" "dedupe $T" "bench fsync"; do
    # shellcheck disable=SC2086
    k $cmd
    [ $RC -eq 2 ] && grep -q "not supported on Windows yet" "$ERR" || bad+=" $cmd (exit $RC);"
done
if [ -z "$bad" ]; then
    pass "not-supported: flash, dedupe and bench fsync exit 2 saying so"
else
    fail "not-supported:$bad"
fi

# method-clone: --method clone where the volume cannot clone (Wine, like
# NTFS, lacks FILE_SUPPORTS_BLOCK_REFCOUNTING) fails that file, saying why,
# and leaves nothing; the default ladder streams it instead.
C=$T/clone
mkdir -p "$C/dst"
echo c >"$C/f"
k copy --method clone "$C/f" "$C/dst/f"
rc1=$RC
grep -q "ERROR_NOT_SUPPORTED" "$ERR"
g1=$?
left=$(find "$C/dst" -mindepth 1 | wc -l)
k copy --explain "$C/f" "$C/dst/f"
if [ $rc1 -eq 1 ] && [ $g1 -eq 0 ] && [ "$left" -eq 0 ] && [ $RC -eq 0 ] &&
    grep -q '^stream' "$OUT" && cmp -s "$C/f" "$C/dst/f"; then
    pass "method-clone: --method clone refused (ERROR_NOT_SUPPORTED, exit 1, nothing left); the ladder streams"
else
    fail "method-clone: exit $rc1, reason given: $([ $g1 -eq 0 ] && echo yes || echo no), left $left"
    show
fi

# copyfile2: CopyFile2 is the first rung for a new file's whole data
# (--explain says "offload ... (CopyFile2)"). Wine 8's kernel32 does not
# export it: then every file steps down to the stream loop, and --explain
# says why (ERROR_CALL_NOT_IMPLEMENTED); --method offload fails the file
# (exit 1) naming CopyFile2 and leaves no temporaries; --verify never uses
# it (it hashes the source as kopiru reads it).
k copy --explain "$S" "$T/cf2-dst"
rc1=$RC
cp "$OUT" "$WORK/cf2-explain"
k copy --explain --verify "$S" "$T/cf2-verify"
rc2=$RC
verify_mentions=$(grep -c CopyFile2 "$OUT")
k copy --method offload "$S/a.txt" "$T/cf2-offload"
rc3=$RC
left=$(find "$T" -maxdepth 1 -name '.kopiru-tmp*' | wc -l)
same=no
diff -r "$S" "$T/cf2-dst" >/dev/null && diff -r "$S" "$T/cf2-verify" >/dev/null && same=yes
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $same = yes ] && [ "$verify_mentions" -eq 0 ] &&
    grep -q '^offload .*(CopyFile2' "$WORK/cf2-explain"; then
    pass "copyfile2: files copied by CopyFile2 (--explain says so); --verify streams"
    if [ $rc3 -eq 0 ] && cmp -s "$S/a.txt" "$T/cf2-offload"; then
        pass "copyfile2: --method offload copies by CopyFile2"
    else
        fail "copyfile2: --method offload exit $rc3"
        show
    fi
    skip "copyfile2: progress and cancel through the engine are checked only by the unit tests (no Ctrl-C under Wine)"
elif [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $same = yes ] && [ "$verify_mentions" -eq 0 ] &&
    [ $rc3 -eq 1 ] && [ "$left" -eq 0 ] && [ ! -e "$T/cf2-offload" ] &&
    grep -q 'CopyFile2' "$ERR" &&
    [ "$(grep -c '^stream .*(CopyFile2: .*ERROR_CALL_NOT_IMPLEMENTED' "$WORK/cf2-explain")" -eq \
        "$(grep -c . "$WORK/cf2-explain")" ]; then
    pass "copyfile2: without CopyFile2 (Wine 8) every file streams and --explain says why; --method offload fails the file (exit 1) naming CopyFile2, nothing left; --verify never tries it"
    skip "copyfile2: CopyFile2's own copy, its progress callback and its cancel (COPYFILE2_PROGRESS_CANCEL from the engine's Cancel): Wine 8's kernel32 does not export CopyFile2, so they are compile-checked only (the unit tests check the refusal)"
else
    fail "copyfile2: exit $rc1 / $rc2 / $rc3, identical $same, --verify mentions CopyFile2 $verify_mentions times, temporaries $left"
    head -5 "$WORK/cf2-explain"
    show
fi

# bench-sweep: seed 002's file-count experiment runs (small here).
mkdir -p "$T/bench"
k bench sweep --dir "$T/bench" --total 1M --counts 1,16,256 --runs 1
if [ $RC -eq 0 ] && grep -Eq '^256 +4\.0 KiB +[0-9.]+s' "$OUT"; then
    pass "bench-sweep: 1 MiB as 1, 16 and 256 files timed"
else
    fail "bench-sweep"
    show
fi

# unit-tests: the engine's library tests (planning, temporary names, the
# record of copies), built for Windows and run under Wine.
if cargo test -q -p kopiru --lib --target x86_64-pc-windows-gnu --no-run \
    --message-format=json >"$WORK/build.json" 2>"$WORK/build.err"; then
    unit=$(grep -o '"executable":"[^"]*"' "$WORK/build.json" | tail -1 | cut -d'"' -f4)
    cp "$unit" "$BIN/kopiru-unit.exe"
    timeout 600 "$WINE" "$BIN/kopiru-unit.exe" --test-threads 2 >"$OUT" 2>"$ERR" </dev/null
    RC=$?
    summary=$(grep '^test result' "$OUT")
    if [ $RC -eq 0 ] && [[ $summary == *" 0 failed"* ]]; then
        pass "unit-tests: ${summary#test result: }"
    else
        fail "unit-tests (exit $RC; 124 is the 600 s timeout)"
        tail -n 20 "$OUT" "$ERR"
    fi
else
    fail "unit-tests: building them for Windows"
    tail -n 20 "$WORK/build.err"
fi

# rename-by-handle: placement by SetFileInformationByHandle(FileRenameInfoEx)
# with POSIX semantics (its unit test, run again to learn which way it went:
# it checks either outcome). Where it is refused, every placement above
# went through MoveFileExW.
if [ -f "$BIN/kopiru-unit.exe" ]; then
    timeout 300 "$WINE" "$BIN/kopiru-unit.exe" rename_by_handle_or_moved --nocapture \
        >"$OUT" 2>"$ERR" </dev/null
    RC=$?
    how=$(grep -o 'KOPIRU-RENAME-BY-HANDLE: .*' "$OUT" | tr -d '\r')
    if [ $RC -ne 0 ]; then
        fail "rename-by-handle: its unit test failed (exit $RC)"
        tail -n 20 "$OUT"
    elif [[ $how == *": used" ]]; then
        pass "rename-by-handle: FileRenameInfoEx with POSIX semantics replaced a file still open"
    elif [[ $how == *": refused: "* ]]; then
        skip "rename-by-handle: Wine refuses SetFileInformationByHandle(FileRenameInfoEx) (${how#*refused: }): every placement here used the MoveFileExW fallback; the handle rename is compile-checked only"
    else
        fail "rename-by-handle: the unit test did not say which way it went"
    fi
else
    fail "rename-by-handle: no unit-test executable"
fi

# archive: -a (which copies security descriptors and alternate data
# streams on Windows) copies a tree without a warning; whether the
# descriptor's DACL and the streams themselves are kept is up to the
# filesystem: their unit tests (run again for what they print) check them
# where it keeps them, and say where it does not (Wine 8).
AR=$T/archive-src
mkdir -p "$AR/sub"
echo one >"$AR/one"
echo two >"$AR/sub/two"
k copy -a "$AR" "$T/archive-dst"
if [ $RC -eq 0 ] && [ ! -s "$ERR" ] && diff -r "$AR" "$T/archive-dst" >/dev/null; then
    pass "archive: copy -a (which asks for security descriptors and streams) exits 0 without a warning, identical"
else
    fail "archive: copy -a"
    show
fi
if [ -f "$BIN/kopiru-unit.exe" ]; then
    timeout 300 "$WINE" "$BIN/kopiru-unit.exe" security_descriptor_copied \
        alternate_data_streams_or_none --nocapture >"$OUT" 2>"$ERR" </dev/null
    RC=$?
    sec=$(grep -o 'KOPIRU-SECURITY: .*' "$OUT" | tr -d '\r')
    ads=$(grep -o 'KOPIRU-ADS: .*' "$OUT" | tr -d '\r')
    if [ $RC -ne 0 ] || [ -z "$sec" ] || [ -z "$ads" ]; then
        fail "security and streams: their unit tests (exit $RC)"
        tail -n 20 "$OUT"
    else
        case $sec in
        *": kept") pass "security: a protected DACL set on a file is copied with -a (owner too)" ;;
        *) skip "security: Wine keeps no DACL set on a file (${sec#*: }); the copy's calls succeed and the owner is kept, the DACL copy is compile-checked only" ;;
        esac
        case $ads in
        *": supported") pass "streams: alternate data streams listed, read and copied" ;;
        *) skip "streams: Wine 8 has no alternate data streams (${ads#*: }); FindFirstStreamW lists none, so nothing is copied; compile-checked only" ;;
        esac
    fi
else
    fail "security and streams: no unit-test executable"
fi

# sparse: a file with holes is copied by its allocated ranges
# (FSCTL_QUERY_ALLOCATED_RANGES) into a copy marked sparse, where Windows
# says the source is sparse (FILE_ATTRIBUTE_SPARSE_FILE). Wine reports no
# such attribute for a Unix file with holes (even with user.DOSATTRIB
# 0x220), so there the file is streamed whole: checked equal, and skipped
# loudly unless the sparse method ran.
P=$T/sparse
mkdir -p "$P/src"
truncate -s 64M "$P/src/holes.img"
head -c 1000000 /dev/urandom | dd of="$P/src/holes.img" bs=1M seek=20 conv=notrunc status=none
k copy --explain "$P/src" "$P/dst"
if [ $RC -ne 0 ] || ! cmp -s "$P/src/holes.img" "$P/dst/holes.img"; then
    fail "sparse: the copy of a file with holes (exit $RC)"
    show
elif grep -q '^sparse ' "$OUT"; then
    pass "sparse: copied by its allocated ranges ($(du -k "$P/dst/holes.img" | cut -f1) KiB allocated of 65536)"
else
    skip "sparse: Wine reports no FILE_ATTRIBUTE_SPARSE_FILE, so the file was streamed whole (equal; $(du -k "$P/dst/holes.img" | cut -f1) KiB allocated); FSCTL_QUERY_ALLOCATED_RANGES and FSCTL_SET_SPARSE are compile-checked only"
fi

skip "symlinks: Wine 8 shows Unix symlinks as their targets, and its CreateSymbolicLinkW reports success without making a link"
# junctions: read as links whose target is \??\..., made again as
# junctions (FSCTL_SET_REPARSE_POINT): its unit test, run again for what it
# prints (where the filesystem refuses, it checks nothing is left behind).
if [ -f "$BIN/kopiru-unit.exe" ]; then
    timeout 300 "$WINE" "$BIN/kopiru-unit.exe" junction_made_again_as_a_junction \
        --nocapture >"$OUT" 2>"$ERR" </dev/null
    RC=$?
    how=$(grep -o 'KOPIRU-JUNCTION: .*' "$OUT" | tr -d '\r')
    if [ $RC -ne 0 ] || [ -z "$how" ]; then
        fail "junctions: their unit test (exit $RC)"
        tail -n 20 "$OUT"
    elif [[ $how == *": made" ]]; then
        pass "junctions: made again as a junction, read back as a link, its entries seen through it"
    else
        skip "junctions: Wine 8 cannot make one (${how#*refused: }; its own mklink /J fails too), and leaves nothing behind; the junction code is compile-checked only"
    fi
else
    fail "junctions: no unit-test executable"
fi
skip "Ctrl-C: Wine 8 does not deliver GenerateConsoleCtrlEvent to kopiru.exe (tried from a helper in a pty console); SetConsoleCtrlHandler is compile-checked only"
skip "ReFS block cloning (FSCTL_DUPLICATE_EXTENTS_TO_FILE): Wine has no ReFS; compile-checked only"

finish
