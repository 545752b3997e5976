# shellcheck shell=bash
# The helpers the shell scripts share, in one file. Sourced, never run:
#   . "$(dirname "$0")/lib.sh"         from scripts/
#   . "$(dirname "$0")/../lib.sh"      from scripts/test/, bench/, release/
# It defines the functions and variables below and nothing else: the
# caller's shell options (set -e and the like) stay the caller's.
#
#   ROOT                          the repository's root (absolute)
#   is_root                       true as root
#   need CHECK PACKAGE            PACKAGE joins MISSING unless CHECK is there:
#                                 a command on PATH, or an absolute path that
#                                 exists; CHECK may list alternatives, a|b
#   install_missing               apt-get installs MISSING as root on Debian,
#                                 then empties it; says why and returns 1
#                                 when it cannot
#   pass, fail, skip MESSAGE      count one check and print it; a skip prints
#                                 "!!!!!!!! SKIPPED: MESSAGE", never a pass
#   tally                         the closing line every test part prints:
#                                 "N passed, N failed, N skipped"
#   finish                        the time taken and the tally, then exits:
#                                 1 if anything failed
#   release_kopiru                builds the release kopiru (seconds when it is
#                                 up to date) and prints its path; KOPIRU=path
#                                 takes that binary instead, unbuilt
#   loop_fs FS IMG MNT MIB        a fresh filesystem on a loop device
#   corpus_fs FS CORPUS IMG MNT   the same, holding a copy of CORPUS
#   system_files_image IMG MIB PERCENT
#                                 an ext4 image of real files (benchmarks)
#   timed NAME COMMAND, report FILE
#                                 interleave.py arguments that record peak
#                                 RSS in RSS_DIR, and their medians with it
#   wine_session_start, wine_session_end
#                                 one Wine session for a run (WINE)
#
# lab-guest.sh does not use it: it runs alone inside the lab's guest.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
START=${START:-$SECONDS}

is_root() { [ "$(id -u)" = 0 ]; }

# --- what a script needs, installed with apt-get ------------------------------
MISSING=()
need() {
    local check checks
    [[ " ${MISSING[*]} " == *" $2 "* ]] && return 0
    IFS='|' read -r -a checks <<<"$1"
    for check in "${checks[@]}"; do
        case $check in
        /*) [ -e "$check" ] && return 0 ;;
        *) command -v "$check" >/dev/null && return 0 ;;
        esac
    done
    MISSING+=("$2")
}

# apt-get waits for a lock another install holds (two scripts side by side)
# rather than failing at once.
install_missing() {
    ((${#MISSING[@]})) || return 0
    if ! is_root || ! command -v apt-get >/dev/null; then
        echo "!!! missing ${MISSING[*]}, and cannot install them (not root, or no apt-get)" >&2
        MISSING=()
        return 1
    fi
    local packages=("${MISSING[@]}")
    MISSING=()
    echo "installing ${packages[*]}" >&2
    # A package of another architecture (musl-dev:arm64) needs it added.
    if [[ " ${packages[*]} " == *":arm64 "* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        dpkg --add-architecture arm64
    fi
    apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
            "${packages[@]}" >/dev/null && return 0
    echo "!!! apt-get install ${packages[*]} failed" >&2
    return 1
}

# --- the tally every test part ends with --------------------------------------
PASS=0 FAIL=0 SKIP=0
pass() { PASS=$((PASS + 1)); echo "ok: $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAILED: $1"; }
skip() { SKIP=$((SKIP + 1)); echo "!!!!!!!! SKIPPED: $1"; }
tally() { echo "$PASS passed, $FAIL failed, $SKIP skipped"; }
finish() {
    echo "($((SECONDS - START)) s)"
    tally
    [ "$FAIL" -eq 0 ]
    exit $?
}

# --- benchmarks ---------------------------------------------------------------
release_kopiru() {
    if [ -n "${KOPIRU:-}" ]; then
        readlink -f "$KOPIRU"
        return
    fi
    (cd "$ROOT" && cargo build --release -q --bin kopiru >&2) || return 1
    echo "${CARGO_TARGET_DIR:-$ROOT/target}/release/kopiru"
}

# FS IMG MNT MIB: IMG made MIB MiB (sparse) and formatted as FS (ext4 with
# an inode per 4 KiB, XFS with reflink, or Btrfs), mounted at MNT, so that
# no benchmark runs on the machine's root filesystem. Whatever was mounted
# at MNT is unmounted first.
loop_fs() {
    local fs=$1 img=$2 mnt=$3 mib=$4
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
    rm -f "$img"
    truncate -s "${mib}M" "$img"
    case $fs in
    ext4) mkfs.ext4 -q -F -i 4096 "$img" ;;
    xfs) mkfs.xfs -q -f -m reflink=1 "$img" ;;
    btrfs) mkfs.btrfs -q -f "$img" >/dev/null ;;
    *) echo "FS must be ext4, xfs or btrfs" >&2; return 2 ;;
    esac
    mkdir -p "$mnt"
    mount -o loop "$img" "$mnt"
}

# FS CORPUS IMG MNT: loop_fs three times CORPUS's size plus 2 GiB, with a
# copy of CORPUS at MNT/src, synced.
corpus_fs() {
    local fs=$1 corpus=$2 img=$3 mnt=$4
    loop_fs "$fs" "$img" "$mnt" $(($(du -sk "$corpus" | cut -f1) * 3 / 1024 + 2048)) || return
    cp -a "$corpus" "$mnt/src"
    sync
}

# IMG MIB PERCENT: unless IMG exists, an ext4 image of MIB MiB filled to
# PERCENT % with real files (stage-system-files.py: from /usr/share and
# /usr/lib), leaving room for ext4's own blocks and the tails of small files.
system_files_image() {
    local img=$1 mib=$2 percent=$3 stage
    [ -f "$img" ] && return 0
    stage=$(dirname "$img")/stage
    rm -rf "$stage" && mkdir -p "$stage"
    python3 "$ROOT/scripts/bench/stage-system-files.py" "$stage" $(((mib * percent / 100) << 20)) &&
        truncate -s "${mib}M" "$img.tmp" &&
        mkfs.ext4 -q -F -d "$stage" "$img.tmp" &&
        mv "$img.tmp" "$img"
    local rc=$?
    rm -rf "$stage"
    return $rc
}

# NAME COMMAND: an interleave.py argument NAME=COMMAND that runs COMMAND
# under /usr/bin/time, its peak RSS appended to RSS_DIR/rss.NAME.
timed() { echo "$1=/usr/bin/time -f %M -a -o $RSS_DIR/rss.$1 $2"; }
# FILE: interleave.py's stderr, saved in FILE, as one line a command: the
# medians of wall and CPU time, and of the peak RSS timed recorded.
report() {
    python3 - "$RSS_DIR" "$1" <<'PY'
import re, statistics, sys
rss_dir, lines = sys.argv[1], open(sys.argv[2]).read().splitlines()
for l in lines:
    m = re.match(r"\s*(\S+): wall median\s+([\d.]+) ms .*CPU median\s+([\d.]+) ms", l)
    if not m: continue
    rss = [int(x) for x in open(f"{rss_dir}/rss.{m[1]}").read().split()]
    print(f"  {m[1]:<28} wall {float(m[2])/1000:7.2f} s  CPU {float(m[3])/1000:7.2f} s"
          f"  peak RSS {statistics.median(rss)/1024:7.1f} MiB")
PY
}

# --- one Wine session for a run -----------------------------------------------
# Used by scripts/test/windows.sh, scripts/test/release.sh and
# bindings/node/scripts/test-windows.sh.
#
# - The run gets its own prefix, a copy of a template prefix made once
#   (KOPIRU_WINEPREFIX, default /tmp/kopiru-wineprefix: ~15 s the first
#   time, and again when Wine's version changes). Its ~700 MB of builtin
#   DLLs and programs are hard-linked, the registry and the rest copied,
#   beside the template (one filesystem). A wineserver serves one prefix,
#   so runs side by side never share one: the end of one run, or anyone's
#   `wineserver -k` on the template, cannot reach another run's processes.
#   Made and copied under a lock: two runs never make it at once.
# - One wineserver serves the whole run, started persistent
#   (`wineserver -p`, which returns once it listens). Left to itself,
#   each `wine` starts a server that quits 3 s after its last client
#   exits, and a client that connects as it quits is dropped: "wine client
#   error:0: recvmsg: Connection reset by peer". On a busy machine the gap
#   between two steps of a script reaches those 3 s.
# - wine_session_end (on the script's exit) stops that server and its
#   system processes (`wineserver -k`, then `-w`) and removes the prefix;
#   the next run clears what a killed run left.
#
# WINE is the wine64 loader (Debian's, unless set). wine_session_start sets
# WINEPREFIX, WINEDEBUG and DISPLAY; it says why and returns 1 if Wine
# cannot start.
WINE=${WINE:-/usr/lib/wine/wine64}
WINE_SESSION_PREFIX=

wine_server() { "${WINE%/*}/wineserver" "$@"; }

# TEMPLATE ready for this Wine: made with `wineboot --init` and left once
# its server has quit (the registry written), stamped with Wine's version.
wine_template_ready() {
    local tpl=$1 version
    version=$("$WINE" --version 2>/dev/null)
    if [ -f "$tpl/.kopiru-wine-version" ] && [ "$(cat "$tpl/.kopiru-wine-version")" = "$version" ]; then
        return 0
    fi
    echo "making the Wine prefix $tpl ($version, once)"
    WINEPREFIX=$tpl wine_server -k 2>/dev/null || true
    rm -rf "$tpl"
    WINEPREFIX=$tpl "$WINE" wineboot --init >/dev/null 2>&1 </dev/null || return 1
    WINEPREFIX=$tpl wine_server -w || return 1
    echo "$version" >"$tpl/.kopiru-wine-version"
}

# Copies the prefix TEMPLATE to DEST: the builtin programs and libraries,
# which Wine never writes once the prefix is made, hard-linked; the rest
# (the registry, .ini files, the profile) copied.
wine_prefix_copy() {
    local tpl=$1 dest=$2
    cp -al "$tpl" "$dest" || return 1
    (cd "$tpl" && find . -type f ! \( -iname '*.dll' -o -iname '*.exe' -o -iname '*.nls' \
        -o -iname '*.sys' -o -iname '*.drv' -o -iname '*.ocx' -o -iname '*.cpl' \
        -o -iname '*.acm' -o -iname '*.tlb' -o -iname '*.ds' -o -iname '*.com' \) -print0 |
        xargs -0 -r cp -a --parents --remove-destination -t "$dest")
}

wine_session_start() {
    local tpl=${KOPIRU_WINEPREFIX:-/tmp/kopiru-wineprefix} d lock ok=0
    export WINEDEBUG=-all DISPLAY=
    exec {lock}>"$tpl.lock"
    flock -x "$lock"
    # Prefixes of runs that were killed, and their servers.
    for d in "$tpl".run.*; do
        [ -d "$d" ] || continue
        kill -0 "${d##*.}" 2>/dev/null && continue
        WINEPREFIX=$d wine_server -k 2>/dev/null || true
        rm -rf "$d"
    done
    if ! wine_template_ready "$tpl"; then
        echo "!!! Wine cannot make its prefix $tpl"
    elif ! wine_prefix_copy "$tpl" "$tpl.run.$$"; then
        echo "!!! cannot copy the Wine prefix $tpl to $tpl.run.$$"
    else
        ok=1
    fi
    exec {lock}>&-
    [ $ok = 1 ] || return 1
    WINE_SESSION_PREFIX=$tpl.run.$$
    export WINEPREFIX=$WINE_SESSION_PREFIX
    if ! wine_server -p 2>/dev/null; then
        echo "!!! wineserver -p did not start for $WINEPREFIX"
        return 1
    fi
    # The session's system processes (services.exe and what it starts)
    # keep the standard error of the Wine process that started them, for
    # as long as the server lives: started here, they hold /dev/null, not
    # a pipe that a caller reads to its end.
    if ! "$WINE" wineboot </dev/null >/dev/null 2>&1; then
        echo "!!! wineboot did not run in $WINEPREFIX"
        return 1
    fi
}

wine_session_end() {
    [ -n "$WINE_SESSION_PREFIX" ] || return 0
    WINEPREFIX=$WINE_SESSION_PREFIX wine_server -k 2>/dev/null || true
    WINEPREFIX=$WINE_SESSION_PREFIX wine_server -w 2>/dev/null || true
    rm -rf "$WINE_SESSION_PREFIX"
    WINE_SESSION_PREFIX=
}
