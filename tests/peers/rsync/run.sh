#!/usr/bin/env bash
# Runs rsync's own testsuite against `kopiru copy`, where their options
# overlap (-a -r --delete --exclude/--include/--exclude-from --link-dest -u
# --backup -c -n -x --partial -i, and a few more: see rsync-as-kopiru).
#
# rsync's source is fetched at test time from Debian (`apt-get source rsync`,
# bookworm's 3.2.7, adding a deb-src entry when apt has none), built with a
# minimal configure and kept under ~/.cache/kopiru-test/rsync-<version>/;
# nothing of rsync's is in this repository. Each test script runs as root
# under `timeout`, with $RSYNC pointing at rsync-dispatch: the calls under
# test (checkit/checktee/checkdiff, and the bare calls in roles.tsv) go to
# rsync-as-kopiru, which turns them into `kopiru copy` command lines; the
# calls that use rsync as a tool go to the real rsync.
#
# list.tsv files every test: pass, option (an rsync option kopiru does not
# take), wording (output differs only), disk (a deliberate difference in what
# ends up on disk, named in docs/copy.md's "Differences from cp and rsync":
# tests/peers/check-differences.py holds the two to each other), bug (a kopiru
# bug to be fixed), skip (cannot run here, or out of scope). The run fails
# when a `pass` test fails, and says loudly when another one passes now.
#
# Usage: run.sh [--peer] [--update] [--past-output] [--keep] [-j N] [TEST...]
#   --peer           run the same harness with the real rsync under test: it
#                    passes every test but those skipped for this machine
#   --update         rewrite list.tsv from this run (disk/bug/wording NOTEs kept)
#   --past-output    look past output differences to what is on disk: kopiru's
#                    itemize lines reshaped as rsync prints them, and the
#                    output comparisons of checkdiff reported, not failed
#                    (for classifying; never with --update)
#   --keep           keep the scratch directories (printed at the end)
#   -j N             tests at once (default 3: they mostly sleep)
#   TEST...          only these (also runs tests listed skip)
# Environment: KOPIRU (the kopiru binary; default: cargo build -p kopiru-cli,
# then target/debug/kopiru), KOPIRU_RSYNC_TIMEOUT (seconds per test, default
# 120), KOPIRU_TEST_CACHE (default ~/.cache/kopiru-test).
#
# Ends with one line: N passed, N failed, N skipped. Only tests that ran
# kopiru and passed count as passed; tests listed option/wording/disk/bug/skip
# count as skipped, each named on a "!!! SKIPPED" line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
list="$here/list.tsv"
roles="$here/roles.tsv"
peer=0 update=0 reshape=0 keep=0 jobs=3
timeout_s=${KOPIRU_RSYNC_TIMEOUT:-120}
only=()
while (($#)); do
    case $1 in
    --peer) peer=1 ;;
    --update) update=1 ;;
    --past-output) reshape=1 ;;
    --keep) keep=1 ;;
    -j) jobs=$2; shift ;;
    -j*) jobs=${1#-j} ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) only+=("${1%.test}") ;;
    esac
    shift
done
if ((update && (peer || reshape))); then
    echo "run.sh: --update takes the plain kopiru run only" >&2
    exit 2
fi
cache=${KOPIRU_TEST_CACHE:-$HOME/.cache/kopiru-test}
mkdir -p "$cache"
started=$(date +%s)

skip_all() {
    echo "!!!!!!!! SKIPPED: rsync's testsuite: $1"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
}

# --- rsync's source and build -------------------------------------------------
# A build is reused when its stamp is there; otherwise fetched and built.
find_build() {
    local stamp
    stamp=$(compgen -G "$cache/rsync-*/build/.kopiru-built" | sort -V | tail -n 1 || true)
    [[ -n $stamp ]] && dirname "$stamp"
    return 0
}

apt_update() {
    local _
    for _ in $(seq 30); do
        apt-get -o DPkg::Lock::Timeout=300 update -qq 2>"$cache/apt-update.err" && return 0
        grep -q 'Could not get lock' "$cache/apt-update.err" || break
        sleep 10
    done
    cat "$cache/apt-update.err" >&2
    return 1
}

has_deb_src() {
    grep -rqsE '^[[:space:]]*deb-src[[:space:]]|^Types:.*deb-src' \
        /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}

fetch_and_build() {
    [[ $(id -u) == 0 ]] || skip_all "not root: cannot apt-get rsync's source and build tools (no cached build in $cache)"
    command -v apt-get >/dev/null || skip_all "no apt-get: rsync's source comes from Debian"
    local need=()
    command -v dpkg-source >/dev/null || need+=(dpkg-dev)
    command -v autoconf >/dev/null || need+=(autoconf)
    command -v gcc >/dev/null || need+=(gcc)
    command -v make >/dev/null || need+=(make)
    [[ -x /usr/bin/python3 ]] || need+=(python3)
    command -v setfacl >/dev/null || need+=(acl)
    command -v setfattr >/dev/null || need+=(attr)
    [[ -e /usr/include/sys/acl.h ]] || need+=(libacl1-dev)
    if ! has_deb_src; then
        # The same mirrors and suites as apt's deb entries, for sources.
        echo "adding deb-src entries (/etc/apt/sources.list.d/kopiru-deb-src.*)" >&2
        local f deb822='' oneline=''
        for f in /etc/apt/sources.list.d/*.sources; do
            [[ -e $f && $f != */kopiru-deb-src.sources ]] || continue
            deb822+=$(sed 's/^Types:.*/Types: deb-src/' "$f")$'\n\n'
        done
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [[ -e $f && $f != */kopiru-deb-src.list ]] || continue
            oneline+=$(sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f")$'\n'
        done
        if [[ -n ${deb822//$'\n'/} ]]; then
            printf '%s' "$deb822" >/etc/apt/sources.list.d/kopiru-deb-src.sources
        fi
        if [[ -n ${oneline//$'\n'/} ]]; then
            printf '%s' "$oneline" >/etc/apt/sources.list.d/kopiru-deb-src.list
        fi
    fi
    local t0=$SECONDS
    apt_update || skip_all "apt-get update failed"
    if ((${#need[@]})); then
        echo "installing ${need[*]}" >&2
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${need[@]}" >/dev/null
    fi
    echo "apt-get update and installs: $((SECONDS - t0)) s" >&2
    t0=$SECONDS
    local fetch
    fetch=$(mktemp -d "$cache/rsync-fetch.XXXXXX")
    # bookworm's own suite (3.2.7, what list.tsv was made with) before
    # whatever is newest: its security suite has moved to 3.5.0.
    (cd "$fetch" && { apt-get -o DPkg::Lock::Timeout=300 source --download-only -qq rsync/bookworm ||
        apt-get -o DPkg::Lock::Timeout=300 source --download-only -qq rsync; } >"$cache/apt-source.log" 2>&1) ||
        { cat "$cache/apt-source.log" >&2; rm -rf "$fetch"; skip_all "apt-get source rsync failed"; }
    # apt checked the files against the archive's signed index; dpkg-source
    # cannot check the uploader's signature without debian-keyring.
    (cd "$fetch" && dpkg-source -q -x ./*.dsc build >"$cache/dpkg-source.log" 2>&1)
    local version
    version=$(dpkg-parsechangelog -l "$fetch/build/debian/changelog" -S Version)
    [[ $version == 3.2.7-* ]] ||
        echo "!!! rsync $version, not bookworm's 3.2.7: list.tsv was made for 3.2.7" >&2
    rm -rf "$cache/rsync-$version"
    mkdir "$cache/rsync-$version"
    mv "$fetch"/* "$cache/rsync-$version/"
    rm -rf "$fetch"
    local b="$cache/rsync-$version/build"
    echo "source fetched and unpacked: $((SECONDS - t0)) s; building rsync $version in $b" >&2
    t0=$SECONDS
    # Debian's patches touch configure.ac, so configure.sh is made anew, as
    # Debian's own build does. No xxhash, zstd, lz4, openssl, system popt or
    # man pages: the tests need none of them.
    (cd "$b" &&
        autoconf -o configure.sh && autoheader && touch config.h.in &&
        CFLAGS='-O1' ./configure -q --disable-xxhash --disable-zstd --disable-lz4 \
            --disable-openssl --with-included-popt --with-included-zlib \
            --disable-md2man --disable-roll-simd --disable-md5-asm >"$b/../configure.log" 2>&1 &&
        make -j"$(nproc)" rsync tls getgroups getfsdev trimslash t_unsafe \
            t_chmod_secure t_secure_relpath wildtest >"$b/../make.log" 2>&1 &&
        make testsuite/chown-fake.test testsuite/devices-fake.test \
            testsuite/xattrs-hlink.test >>"$b/../make.log" 2>&1) ||
        { tail -n 30 "$b/../configure.log" "$b/../make.log" >&2; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
    touch "$b/.kopiru-built"
    echo "rsync built: $((SECONDS - t0)) s" >&2
    build=$b
}

build=$(find_build)
if [[ -z $build ]]; then
    fetch_and_build
fi
# What the tests themselves run (a cached build may outlive an installation).
runtime_need=()
[[ -x /usr/bin/python3 ]] || runtime_need+=(python3)
command -v setfacl >/dev/null || runtime_need+=(acl)
command -v setfattr >/dev/null || runtime_need+=(attr)
if ((${#runtime_need[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        echo "installing ${runtime_need[*]}" >&2
        apt_update && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${runtime_need[@]}" >/dev/null
    else
        echo "!!! missing ${runtime_need[*]}: the tests needing them will fail or skip" >&2
    fi
fi
ready=$(date +%s)
version=$(basename "$(dirname "$build")")
echo "== $version (source and build: $build; ready in $((ready - started)) s)"

# --- kopiru -------------------------------------------------------------------
if ((!peer)); then
    if [[ -z ${KOPIRU:-} ]] && command -v cargo >/dev/null; then
        (cd "$repo" && cargo build -q -p kopiru-cli) && KOPIRU="$repo/target/debug/kopiru"
    fi
    [[ -n ${KOPIRU:-} && -x ${KOPIRU:-} ]] ||
        { echo "run.sh: no kopiru binary: build it (cargo build -p kopiru-cli) or set KOPIRU" >&2
          echo "0 passed, 1 failed, 0 skipped"; exit 1; }
    KOPIRU=$(realpath "$KOPIRU")
    echo "== kopiru under test: $KOPIRU ($("$KOPIRU" --version 2>/dev/null | head -n 1))"
else
    echo "== --peer: the real rsync under test ($build/rsync)"
fi

# --- the list -----------------------------------------------------------------
declare -A listed note
if [[ -f $list ]]; then
    while IFS=$'\t' read -r t l n; do
        [[ -z $t || $t == \#* ]] && continue
        listed[$t]=$l
        note[$t]=$n
    done <"$list"
fi

# --- the suite, as run here ---------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/kopiru-rsync.XXXXXX")
cleanup() { ((keep)) || rm -rf "$work"; }
trap cleanup EXIT
suite="$work/suite"
mkdir "$suite" "$work/scratch" "$work/res"
for f in "$build"/testsuite/*.test; do
    cp -L "$f" "$suite/"
done
# The check functions mark what they run as under test (each has one
# `eval "$1"` followed by `status=$?`).
# shellcheck disable=SC2016 # sed scripts: their $ are rsync.fns' own
sed -e 's/^\(    \)eval "\$1"\(.*\)$/\1KOPIRU_UNDER_TEST=1; export KOPIRU_UNDER_TEST\n\1eval "$1"\2/' \
    -e 's/^\(    \)status=\$?$/\1status=$?\n\1KOPIRU_UNDER_TEST=0/' \
    "$build/testsuite/rsync.fns" >"$suite/rsync.fns"
if ((reshape)); then
    # shellcheck disable=SC2016 # the $ is rsync.fns' own
    sed -i 's/|| failed="$failed output differs"/|| echo "KOPIRU-HARNESS: output differs (not failed: --past-output)"/' "$suite/rsync.fns"
fi
marks=$(grep -c 'KOPIRU_UNDER_TEST=1; export' "$suite/rsync.fns" || true)
resets=$(grep -c 'KOPIRU_UNDER_TEST=0' "$suite/rsync.fns" || true)
if [[ $marks != 3 || $resets != 3 ]]; then
    echo "run.sh: rsync.fns is not as expected (checkit/checktee/checkdiff2 marked $marks, reset $resets times, 3 each expected)" >&2
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
# Debian skips the device tests for kfreebsd and hurd; upstream runs them on
# Linux, and so does this harness.
for t in devices devices-fake; do
    sed -i '/test_skipped "Patched by Debian to skip/d' "$suite/$t.test"
done
# Bare calls under test (roles.tsv).
while IFS=$'\t' read -r t pattern why; do
    [[ -z $t || $t == \#* ]] && continue
    f="$suite/$t.test"
    n=$(grep -cF -- "$pattern" "$f" || true)
    if [[ $n == 0 ]]; then
        echo "run.sh: roles.tsv: no line of $t.test holds: $pattern" >&2
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
    PATTERN=$pattern awk '
        index($0, ENVIRON["PATTERN"]) { i = index($0, "$RSYNC"); $0 = substr($0, 1, i - 1) "KOPIRU_UNDER_TEST=1 " substr($0, i) }
        { print }' "$f" >"$f.new"
    mv "$f.new" "$f"
done <"$roles"

tests=()
if ((${#only[@]})); then
    tests=("${only[@]}")
else
    for f in "$suite"/*.test; do
        t=$(basename "$f" .test)
        # Out of scope or not runnable here: not run (--peer runs all).
        if ((!peer)) && [[ ${listed[$t]:-} == skip ]]; then continue; fi
        tests+=("$t")
    done
fi

# What runtests.sh sets for every test.
tls_args=''
grep -qE '^#define HAVE_LUTIMES 1' "$build/config.h" && tls_args="$tls_args -l"
grep -qE '#undef CHOWN_MODIFIES_SYMLINK' "$build/config.h" && tls_args="$tls_args -L"
setfacl_nodef=true
setfacl --help 2>&1 | grep -q ' -k,\|\[-[a-z]*k' && setfacl_nodef='setfacl -k'
# chmod-temp-dir wants a temporary directory on another filesystem.
test_tmp=''
if [[ -d /dev/shm && $(stat -c %d /dev/shm) != $(stat -c %d "$work") ]]; then test_tmp=/dev/shm; fi

run_one() {
    local t=$1
    local scratch="$work/scratch/$t"
    mkdir "$scratch"
    $setfacl_nodef "$scratch" 2>/dev/null || true
    chmod g-s "$scratch"
    ln -s "$build" "$scratch/src"
    : >"$scratch/kopiru-wrapper.log"
    local t0 rc
    t0=$(date +%s)
    set +e
    (
        cd "$build" || exit 2
        # shellcheck source=/dev/null # written by rsync's configure at test time
        . ./shconfig
        export POSIXLY_CORRECT=1 TOOLDIR="$build" srcdir="$build" RSYNC="$here/rsync-dispatch"
        export TLS_ARGS="$tls_args" setfacl_nodef scratchdir="$scratch" suitedir="$suite"
        export TESTRUN_TIMEOUT="$timeout_s" RSYNC_TEST_TMP="$test_tmp"
        export KOPIRU_REAL_RSYNC="$build/rsync" KOPIRU_WRAPPER="$here/rsync-as-kopiru"
        export KOPIRU_WRAPPER_LOG="$scratch/kopiru-wrapper.log" KOPIRU_PEER="$peer"
        export KOPIRU="${KOPIRU:-}" KOPIRU_UNDER_TEST=0
        ((reshape)) && export KOPIRU_RSYNC_ITEMIZE=rsync
        exec timeout -k 10 "$timeout_s" sh -e "$suite/$t.test"
    ) </dev/null >"$scratch/test.log" 2>&1
    rc=$?
    set -e
    echo "$rc $(($(date +%s) - t0))" >"$work/res/$t"
}

echo "== ${#tests[@]} tests, $jobs at once, ${timeout_s} s each at most"
running=0
for t in "${tests[@]}"; do
    if [[ ! -f $suite/$t.test ]]; then
        echo "run.sh: no test $t" >&2
        exit 2
    fi
    run_one "$t" &
    running=$((running + 1))
    if ((running >= jobs)); then
        wait -n || true
        running=$((running - 1))
    fi
done
wait

# --- results ------------------------------------------------------------------
passed=0 failed=0 skipped=0
declare -A result why
show_log() {
    local s="$work/scratch/$1"
    echo "----- $1: calls (kopiru-wrapper.log)"
    sed 's/^/    /' "$s/kopiru-wrapper.log" | tail -n 40
    echo "----- $1: test.log (last 60 lines)"
    tail -n 60 "$s/test.log" | sed 's/^/    /'
    echo "-----"
}
for t in "${tests[@]}"; do
    read -r rc secs <"$work/res/$t"
    s="$work/scratch/$t"
    wl="$s/kopiru-wrapper.log"
    refused=$(sed -n 's/^NOT TAKEN: //p' "$wl" | awk '!seen[$0]++' | paste -sd ';' - | sed 's/;/; /g')
    ran=$(grep -c '^\(KOPIRU\|PEER\): ' "$wl" || true)
    r=fail w=''
    if [[ $rc == 77 ]]; then
        r=skip w="rsync's test skips itself: $(cat "$s/whyskipped" 2>/dev/null || echo '?')"
    elif [[ -n $refused ]]; then
        r=option w=$refused
    elif [[ $rc == 0 && $ran -gt 0 ]]; then
        r=pass
    elif [[ $rc == 0 ]] && grep -q '^REMOTE: ' "$wl"; then
        r=skip w='every copy under test is remote or a daemon (out of scope): rsync ran them'
        ((peer)) && r=pass w="(remote or daemon: $w)"
    elif [[ $rc == 0 ]]; then
        r=skip w="no copy under test: it checks rsync's own helpers or internals"
        ((peer)) && r=pass w="($w)"
    elif [[ $rc == 124 || $rc == 137 ]]; then
        w="timed out after ${timeout_s} s"
    else
        w="exit $rc"
    fi
    result[$t]=$r
    why[$t]=$w
    l=${listed[$t]:-}
    if ((peer)); then
        case $r in
        pass) passed=$((passed + 1)); printf 'ok      %-32s %3ss %3s under test %s\n' "$t" "$secs" "$ran" "$w" ;;
        skip) skipped=$((skipped + 1)); echo "!!! SKIPPED: $t: $w" ;;
        *) failed=$((failed + 1)); echo "FAIL    $t ($w)"; show_log "$t" ;;
        esac
        continue
    fi
    if [[ $r == pass ]]; then
        passed=$((passed + 1))
        if [[ $l == pass ]]; then
            printf 'ok      %-32s %3ss %3s under test\n' "$t" "$secs" "$ran"
        else
            echo "!!!!!!!! NOW PASSES: $t (${secs}s; listed ${l:-nowhere}: ${note[$t]:-}): run.sh --update"
        fi
    elif [[ $l == pass ]]; then
        failed=$((failed + 1))
        echo "FAIL    $t (${secs}s): listed pass, now $r ($w)"
        show_log "$t"
    else
        skipped=$((skipped + 1))
        if [[ -z $l ]]; then
            echo "!!! SKIPPED: $t (${secs}s): NOT IN list.tsv, $r: $w (run.sh --update)"
        elif [[ $l != "$r" && ! ($r == fail && ($l == disk || $l == bug || $l == wording)) ]]; then
            echo "!!! SKIPPED ($l): $t (${secs}s): CHANGED, now $r: $w (listed: ${note[$t]:-})"
        else
            echo "!!! SKIPPED ($l): $t (${secs}s): ${note[$t]:-$w}"
        fi
    fi
done
if ((!peer)); then
    for t in $(printf '%s\n' "${!listed[@]}" | sort); do
        if [[ ${listed[$t]} == skip && -z ${result[$t]:-} && ${#only[@]} == 0 ]]; then
            skipped=$((skipped + 1))
            echo "!!! SKIPPED: $t: ${note[$t]}"
        fi
    done
fi

if ((update)); then
    {
        echo "# rsync's testsuite against kopiru copy (tests/peers/rsync/run.sh)."
        echo "# TEST<TAB>LIST<TAB>NOTE; LIST: pass, option (NOTE: the option kopiru does not take),"
        echo "# wording (output differs only), disk (what ends up on disk differs, deliberately and"
        echo "# losing nothing: NOTE says how; docs/copy.md \"Differences from cp and rsync\" names each,"
        echo "# tests/peers/check-differences.py checks it), bug (a kopiru bug to be fixed: NOTE says"
        echo "# which), skip (cannot run here, or out of scope: NOTE says why). run.sh --update rewrites it."
        for t in $(printf '%s\n' "${!listed[@]}" "${tests[@]}" | sort -u); do
            r=${result[$t]:-}
            l=${listed[$t]:-} n=${note[$t]:-}
            if [[ -z $r ]]; then
                printf '%s\t%s\t%s\n' "$t" "$l" "$n"
            elif [[ $r == pass ]]; then
                printf '%s\tpass\t\n' "$t"
            elif [[ $r == skip && $l == skip && -n $n ]]; then
                printf '%s\tskip\t%s\n' "$t" "$n"
            elif [[ $r == option || $r == skip ]]; then
                printf '%s\t%s\t%s\n' "$t" "$r" "${why[$t]}"
            elif [[ $l == disk || $l == bug || $l == wording ]]; then
                printf '%s\t%s\t%s\n' "$t" "$l" "$n"
            else
                printf '%s\tdisk\t%s\n' "$t" "UNCLASSIFIED: fails (${why[$t]}); see its log"
            fi
        done
    } >"$list.new"
    mv "$list.new" "$list"
    echo "== list.tsv rewritten"
fi

((keep)) && echo "== scratch directories kept in $work/scratch"
echo "== tests ran in $(($(date +%s) - ready)) s (setup $((ready - started)) s)"
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
