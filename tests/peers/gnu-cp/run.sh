#!/usr/bin/env bash
# GNU coreutils' own cp tests, run against `kopiru cp` (as uutils runs GNU's
# suite against its cp). Nothing of GNU's is in this repository: the source
# of the coreutils Debian installed is fetched with `apt-get source` into
# ~/.cache/kopiru-test/coreutils-VERSION (kept for the next run).
#
# The tests run as `make check` would run them from a build tree, without
# building coreutils: a directory with a `src/` whose `cp` execs `kopiru
# cp "$@"` and whose other programs are the system's coreutils, the
# environment coreutils' tests/local.mk gives each test, and a stand-in
# config.h (the few defines the cp tests read, from how Debian built cp).
# Each test runs with a timeout, as root and as `nobody` (the root-only
# tests also use GNU's NON_ROOT_USERNAME=nobody themselves), several at
# once.
#
# Outcomes are held against list.tsv (TEST USER LIST NOTE): a test listed
# `pass` must pass (else it is counted failed); the tests listed `option`,
# `wording`, `disk` (known differences: a `disk` one is deliberate, named in
# docs/copy.md's "Differences from cp and rsync", which
# tests/peers/check-differences.py holds to the list), `bug` (a kopiru bug
# to be fixed) or `skip` (skipped for this machine even with GNU cp) are
# counted skipped, and one of them that passes now is reported loudly
# ("move it to pass"). The last line is
# `N passed, N failed, N skipped`: passed = (test, user) runs that passed,
# failed = runs listed `pass` that did not pass (or a failing test not in
# the list), skipped = everything else (skipped for the environment, or
# failing as listed).
#
# Usage: tests/peers/gnu-cp/run.sh [--peer] [--update] [--users root,nobody]
#                                  [--jobs N] [--expensive] [--keep] [TEST...]
#   --peer     run the same harness with GNU's /usr/bin/cp instead, to show
#              the harness is right (GNU cp should pass all but the tests
#              this machine skips); the list is not used
#   --update   rewrite list.tsv from this run (NOTEs kept; a new failure
#              is filed as `option` when kopiru refused an option, else as
#              `disk` with an UNCLASSIFIED note to be looked at)
#   --users    whom to run as (default root,nobody; not root: only nobody,
#              as the calling user)
#   --expensive  also the tests GNU marks expensive (cp/link-heap.sh, 85 s)
#              and very expensive (cp/perm.sh, 45 s), off as in `make check`
#   --keep     keep the scratch build tree (its path is printed)
#   TEST       e.g. cp/link.sh or mv/hard-2.sh (default: all of them)
# Environment: KOPIRU (default target/release/kopiru, which is built first),
# KOPIRU_GNU_CP_TIMEOUT (seconds per test, 60; three times that for
# copy-FMR.sh, which runs cp under valgrind; a third for the two FIFO
# handshakes, which hang until killed when cp exits early; GNU cp's slowest
# other test takes 6 s on a quiet machine, 22 on a busy one),
# KOPIRU_GNU_CP_JOBS (tests at once: three per CPU, as most of them wait on
# processes, not the CPU). Logs: target/gnu-cp/{kopiru,peer}/USER/*.log.
set -euo pipefail
umask 022
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
list=$here/list.tsv

peer=0
update=0
keep=0
users=root,nobody
jobs=${KOPIRU_GNU_CP_JOBS:-$(($(nproc) * 3))}
timeout_s=${KOPIRU_GNU_CP_TIMEOUT:-60}
selected=()
while (($#)); do
  case $1 in
    --peer) peer=1 ;;
    --update) update=1 ;;
    --keep) keep=1 ;;
    --expensive) export RUN_EXPENSIVE_TESTS=yes RUN_VERY_EXPENSIVE_TESTS=yes ;;
    --users) users=$2; shift ;;
    --users=*) users=${1#*=} ;;
    --jobs) jobs=$2; shift ;;
    --jobs=*) jobs=${1#*=} ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) selected+=("${1#tests/}") ;;
  esac
  shift
done
if ((peer && update)); then
  echo "run.sh: --update records kopiru's outcomes; not with --peer" >&2
  exit 2
fi
mode=kopiru
((peer)) && mode=peer

# Ends the run without testing anything, counted as one skipped check.
give_up() {
  echo "!!!!!!!! SKIPPED: GNU cp tests: $*"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
}

is_root=0
[[ $(id -u) == 0 ]] && is_root=1

# What the tests call: the ACL and xattr tools, setcap, filefrag and mkfs
# (e2fsprogs), python3 (SEEK_DATA probe), perl, a C compiler (two tests
# build an LD_PRELOAD shim), valgrind (copy-FMR.sh), setpriv; dpkg-dev
# unpacks the source.
need=()
command -v dpkg-source >/dev/null || need+=(dpkg-dev)
command -v getfacl >/dev/null || need+=(acl)
command -v getfattr >/dev/null || need+=(attr)
[[ -x /usr/sbin/setcap || -x /sbin/setcap ]] || need+=(libcap2-bin)
[[ -x /usr/sbin/filefrag || -x /sbin/filefrag ]] || need+=(e2fsprogs)
[[ -x /usr/bin/python3 ]] || need+=(python3)
command -v perl >/dev/null || need+=(perl)
command -v gcc >/dev/null || need+=(gcc)
command -v valgrind >/dev/null || need+=(valgrind)
command -v setpriv >/dev/null || need+=(util-linux)
if ((${#need[@]})); then
  if ((is_root)) && command -v apt-get >/dev/null; then
    echo "installing ${need[*]}" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; } ||
      echo "!!! apt-get install ${need[*]} failed: the tests needing them will skip or fail" >&2
  else
    echo "!!! missing ${need[*]} and cannot install them: the tests needing them will skip or fail" >&2
  fi
fi

# --- GNU's source: the version of the installed coreutils -----------------
command -v dpkg-query >/dev/null || give_up "not a Debian system (no dpkg-query)"
version=$(dpkg-query -W -f '${Version}' coreutils 2>/dev/null) || give_up "coreutils is not a Debian package here"
upstream=${version#*:}
upstream=${upstream%-*}
cache=$HOME/.cache/kopiru-test
src=$cache/coreutils-$version

# apt-get source needs a deb-src entry; Debian's images have only `deb`.
# Adds one for the same Debian mirrors and suites (deb822 stanzas and
# one-line entries whose URI names debian), then refreshes the index.
add_deb_src() {
  local f out=/etc/apt/sources.list.d/kopiru-deb-src.sources
  local oneline=/etc/apt/sources.list.d/kopiru-deb-src.list
  : >"$out.tmp"
  : >"$oneline.tmp"
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f && $f != "$out" ]] || continue
    # A stanza is a paragraph; keep those enabled whose Types has deb and
    # whose URIs name debian, with Types: deb-src.
    awk 'BEGIN { RS = ""; FS = "\n" }
      {
        types = 0; debian = 0; off = 0; body = ""
        for (i = 1; i <= NF; i++) {
          line = $i
          if (line ~ /^#/) continue
          if (line ~ /^Types:/) { if (line ~ /[ \t]deb([ \t]|$)/) types = 1; line = "Types: deb-src" }
          if (line ~ /^URIs:/ && line ~ /debian/) debian = 1
          if (line ~ /^Enabled:[ \t]*no/) off = 1
          body = body line "\n"
        }
        if (types && debian && !off) printf "%s\n", body
      }' "$f" >>"$out.tmp"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f && $f != "$oneline" ]] || continue
    sed -n 's/^[[:space:]]*deb\([[:space:]].*debian.*\)$/deb-src\1/p' "$f" >>"$oneline.tmp"
  done
  local added=()
  if [[ -s $out.tmp ]]; then mv "$out.tmp" "$out"; added+=("$out"); else rm -f "$out.tmp"; fi
  if [[ -s $oneline.tmp ]]; then mv "$oneline.tmp" "$oneline"; added+=("$oneline"); else rm -f "$oneline.tmp"; fi
  ((${#added[@]})) || return 1
  echo "added deb-src entries for Debian's mirrors (${added[*]}); apt-get update" >&2
  apt-get update -qq || echo "!!! apt-get update failed" >&2
}

has_deb_src() { apt-get indextargets --no-release-info 'Created-By: Sources' 2>/dev/null | grep -q .; }

fetch_source() {
  mkdir -p "$cache"
  local tmp
  tmp=$(mktemp -d "$cache/coreutils-fetch.XXXXXX")
  if ! has_deb_src; then
    ((is_root)) || { rm -rf "$tmp"; give_up "no deb-src entry in apt, and not root to add one (or put coreutils' source in $src)"; }
    add_deb_src || { rm -rf "$tmp"; give_up "no Debian mirror in apt's sources to add a deb-src entry for"; }
  fi
  echo "fetching coreutils $version's source with apt-get source into $src" >&2
  if ! (cd "$tmp" && apt-get source -qq "coreutils=$version" >/dev/null 2>"$tmp/err"); then
    # The index may be stale (entry added earlier, never updated).
    if ((is_root)) && apt-get update -qq && (cd "$tmp" && apt-get source -qq "coreutils=$version" >/dev/null 2>"$tmp/err"); then
      :
    else
      cat "$tmp/err" >&2
      rm -rf "$tmp"
      give_up "apt-get source coreutils=$version failed"
    fi
  fi
  local dir
  dir=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'coreutils-*' | head -n 1)
  [[ -n $dir && -f $dir/tests/init.sh ]] || { rm -rf "$tmp"; give_up "apt-get source left no coreutils tree"; }
  mv "$dir" "$src"
  rm -rf "$tmp"
}
[[ -f $src/tests/init.sh ]] || fetch_source

# --- which tests ----------------------------------------------------------
# All of tests/cp, and those of tests/misc and tests/mv that name cp among
# the programs they test (print_ver_), plus two that check cp itself while
# naming another: misc/close-stdout.sh (cp with stdout closed or full) and
# mv/trailing-slash.sh (`cp b no-such/`). The other misc tests that run cp
# only use it to make a file for the program they test.
all_tests=()
while IFS= read -r t; do all_tests+=("$t"); done < <(
  cd "$src/tests"
  shopt -s nullglob
  for t in cp/*.sh cp/*.pl; do echo "$t"; done
  for t in misc/*.sh misc/*.pl mv/*.sh mv/*.pl; do
    if grep -qE '^print_ver_ .*\bcp\b' "$t"; then echo "$t"; fi
  done
  for t in misc/close-stdout.sh mv/trailing-slash.sh; do
    if [[ -f $t ]]; then echo "$t"; fi
  done
)
mapfile -t all_tests < <(printf '%s\n' "${all_tests[@]}" | sort -u)
# The slow ones first, so that they overlap the rest: cp under valgrind,
# the tests that sleep, and the FIFO tests that hang until the timeout
# while kopiru refuses --copy-contents.
slow_first="cp/copy-FMR.sh cp/file-perm-race.sh cp/existing-perm-race.sh
  cp/parent-perm-race.sh cp/cp-mv-backup.sh cp/sparse-extents-2.sh
  cp/sparse-to-pipe.sh cp/same-file.sh cp/sparse.sh mv/part-symlink.sh"
order_slow_first() {
  local t
  for t in $slow_first; do
    [[ " $* " == *" $t "* ]] && echo "$t"
  done
  for t in "$@"; do
    [[ " $slow_first " == *[[:space:]]"$t"[[:space:]]* ]] || echo "$t"
  done
}
if ((${#selected[@]})); then
  for t in "${selected[@]}"; do
    [[ -f $src/tests/$t ]] || { echo "run.sh: no test $t in coreutils $version" >&2; exit 2; }
  done
  tests_to_run=("${selected[@]}")
else
  tests_to_run=("${all_tests[@]}")
fi
mapfile -t tests_to_run < <(order_slow_first "${tests_to_run[@]}")

# --- whom to run as -------------------------------------------------------
run_users=()
IFS=, read -ra wanted <<<"$users"
for u in "${wanted[@]}"; do
  case $u in
    root)
      if ((is_root)); then run_users+=(root); else echo "!!!!!!!! SKIPPED: GNU cp tests as root: not root"; fi ;;
    nobody) run_users+=(nobody) ;;
    *) echo "run.sh: --users takes root and nobody" >&2; exit 2 ;;
  esac
done
((${#run_users[@]})) || give_up "no user to run as"
nobody_uid=$(id -u nobody 2>/dev/null || echo 65534)
nobody_gid=$(id -g nobody 2>/dev/null || echo 65534)
# A second group for nobody, so that existing-perm-race.sh (which needs
# membership in two groups) runs too.
second_gid=$(getent group users | cut -d: -f3 || true)

# --- the cp under test ----------------------------------------------------
if ((peer)); then
  gnu_cp=$(command -v cp)
  gnu_cp=$(readlink -f "$gnu_cp")
  "$gnu_cp" --version | head -n 1 | grep -q 'GNU coreutils' || give_up "$gnu_cp is not GNU cp"
else
  kopiru=${KOPIRU:-$repo/target/release/kopiru}
  if [[ -n ${KOPIRU:-} ]]; then
    [[ -x $kopiru ]] || give_up "KOPIRU=$kopiru is not executable"
  elif command -v cargo >/dev/null; then
    # Also when it exists: a stale binary would test old code.
    echo "cargo build --release -p kopiru-cli" >&2
    (cd "$repo" && cargo build --release -q -p kopiru-cli >&2) || give_up "cargo build failed"
  else
    [[ -x $kopiru ]] || give_up "no $kopiru, and no cargo to build it"
  fi
fi

# --- the stand-in build tree ----------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/kopiru-gnu-cp.XXXXXX")
chmod 755 "$work"
cleanup() {
  if ((keep)); then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
# The programs: every coreutils program of the system (ginstall is
# `install`), and cp: a script exec'ing the cp under test.
mkdir "$work/src" "$work/bin"
built=()
while IFS= read -r p; do
  name=${p##*/}
  [[ $name == cp ]] && continue
  [[ -e $work/src/$name ]] && continue
  ln -s "$p" "$work/src/$name"
  built+=("$name")
done < <(dpkg -L coreutils | grep -E '^(/usr)?/s?bin/[^/]+$')
ln -s "$(command -v install)" "$work/src/ginstall"
built+=(ginstall cp)
if ((peer)); then
  # As `make check` runs it: argv[0] is cp, which GNU's messages start with.
  printf '#!/bin/bash\nexec -a cp %q "$@"\n' "$gnu_cp" >"$work/src/cp"
else
  # A copy nobody can run whatever the permissions of the repository.
  command cp "$kopiru" "$work/bin/kopiru"
  chmod 755 "$work/bin/kopiru"
  printf '#!/bin/sh\nexec %q cp "$@"\n' "$work/bin/kopiru" >"$work/src/cp"
fi
chmod 755 "$work/src/cp"

# The config.h defines that the chosen tests grep, as Debian built cp:
# ACL and xattr support follow from the libraries /usr/bin/cp links; the
# rest are glibc on Linux. HAVE_CAP (libcap, which only ls uses) is set
# whatever the build, since capability.sh checks cp's xattr order only.
{
  echo "/* stand-in written by kopiru's tests/peers/gnu-cp/run.sh */"
  cp_libs=$(ldd /usr/bin/cp 2>/dev/null || true)
  [[ $cp_libs == *libacl* ]] && echo '#define USE_ACL 1'
  [[ $cp_libs == *libattr* ]] && echo '#define USE_XATTR 1'
  [[ $cp_libs == *libselinux* ]] && echo '#define HAVE_SELINUX_SELINUX_H 1'
  echo '#define HAVE_CAP 1'
  echo '#define HAVE_LINKAT 1'
  echo '#undef LINKAT_SYMLINK_NOTSUP'
  echo '#define HAVE_UTIMENSAT 1'
  echo '#define HAVE_LUTIMES 1'
  echo '#define HAVE_OPENAT 1'
} >"$work/config.h"

# One in-tree build directory per user, which is also its srcdir: ./src,
# and its own copy of GNU's tests and init.cfg (the cache is under root's
# home; the perl tests make their temporary directories beside the test).
# $0 stays relative: require_root_ reads the test as ../$0 from its
# temporary directory.
for u in "${run_users[@]}"; do
  mkdir "$work/$u" "$work/$u/tmp"
  ln -s ../src "$work/$u/src"
  command cp -R "$src/tests" "$src/init.cfg" "$work/$u/"
  if [[ $u == nobody ]] && ((is_root)); then
    chown -R "$nobody_uid:$nobody_gid" "$work/$u"
  fi
done

logroot=$repo/target/gnu-cp/$mode
rm -rf "$logroot"
mkdir -p "$logroot"
mkdir "$work/results"
awk_prog="awk"
if command -v gawk >/dev/null; then awk_prog="gawk"; fi

# Runs one test as one user; writes "TEST USER OUTCOME MILLISECONDS
# SKIP-REASON" to the results. Outcomes: pass (0), skip (77), error (99: the test's own
# set-up failed), timeout, fail (anything else).
run_one() {
  local user=$1 test=$2
  local dir=$work/$user log=$logroot/$user/${test//\//-}.log
  local -a as=()
  if [[ $user == nobody ]] && ((is_root)); then
    as=(setpriv --reuid="$nobody_uid" --regid="$nobody_gid")
    if [[ -n $second_gid ]]; then as+=(--groups="$nobody_gid,$second_gid"); else as+=(--clear-groups); fi
  fi
  # valgrind runs kopiru's threads on one CPU: 12 s on a quiet machine,
  # 40 on a busy one. The two FIFO handshakes take GNU's cp 0.3 s even on
  # a busy machine, and hang until killed when cp exits early.
  local limit=$timeout_s
  case $test in
    cp/copy-FMR.sh) limit=$((timeout_s * 3)) ;;
    cp/file-perm-race.sh | cp/existing-perm-race.sh) limit=$(((timeout_s + 2) / 3)) ;;
  esac
  local start end rc=0
  start=$(date +%s%N)
  # shellcheck disable=SC2016 # $1, $PERL and $srcdir are the inner shell's
  (
    cd "$dir"
    exec env -i \
      PATH="$dir/src:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      HOME="$dir" TMPDIR="$dir/tmp" LC_ALL=C TERM=dumb \
      VERSION="$upstream" PACKAGE_VERSION="$upstream" \
      abs_top_builddir="$dir" abs_top_srcdir="$dir" abs_srcdir="$dir" \
      srcdir="$dir" top_srcdir="$dir" \
      built_programs="${built[*]}" fail=0 host_os=linux-gnu \
      host_triplet="$(uname -m)-pc-linux-gnu" CONFIG_HEADER="$work/config.h" \
      CU_TEST_NAME="coreutils-$upstream,tests-${test//\//-}" \
      CC=gcc AWK="$awk_prog" EGREP='grep -E' EXEEXT= MAKE=make PERL=perl \
      SHELL=/bin/bash VERBOSE=yes NON_ROOT_USERNAME=nobody \
      VALGRIND_OPTS=--trace-children=yes \
      RUN_EXPENSIVE_TESTS="${RUN_EXPENSIVE_TESTS-}" RUN_VERY_EXPENSIVE_TESTS="${RUN_VERY_EXPENSIVE_TESTS-}" \
      timeout -k 5 "$limit" "${as[@]}" \
      bash -c '
        case $1 in
          *.pl) exec "$PERL" -w -I"$srcdir/tests" -MCuSkip -MCoreutils "-MCuTmpdir qw(${1#./})" "$1" ;;
          *) exec "$SHELL" "$1" ;;
        esac' run "./tests/$test"
  ) </dev/null >"$log" 2>&1 9>&2 || rc=$?
  end=$(date +%s%N)
  local outcome reason=
  case $rc in
    0) outcome=pass ;;
    77) outcome=skip
      reason=$(grep -m1 -E '^[^+ ][^ ]*: skipped test: ' "$log" | sed 's/^[^ ]*: skipped test: //' | tr '\t' ' ' || true) ;;
    99) outcome=error ;;
    124 | 137) outcome=timeout ;;
    *) outcome=fail ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\n' "$test" "$user" "$outcome" \
    "$(((end - start) / 1000000))" "$reason" >"$work/results/$user.${test//\//-}"
}

for u in "${run_users[@]}"; do mkdir -p "$logroot/$u"; done
if ((peer)); then what="GNU cp ($gnu_cp)"; else what="kopiru cp ($kopiru)"; fi
echo "== GNU coreutils $version's cp tests against $what: ${#tests_to_run[@]} tests as ${run_users[*]}, $jobs at once, ${timeout_s}s each"
t0=$(date +%s%N)
for t in "${tests_to_run[@]}"; do
  for u in "${run_users[@]}"; do
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
    run_one "$u" "$t" &
  done
done
wait
t1=$(date +%s%N)

# --- outcomes against the list --------------------------------------------
declare -A list_kind list_note
if [[ -f $list ]]; then
  while IFS=$'\t' read -r t u k n; do
    [[ -z $t || $t == \#* ]] && continue
    list_kind[$t/$u]=$k
    list_note[$t/$u]=$n
  done <"$list"
fi
# The entry for a test as a user: its own line, else the line for both.
lookup() {
  local key=$1/$2
  [[ -n ${list_kind[$key]+x} ]] || key=$1/both
  kind=${list_kind[$key]-}
  note=${list_note[$key]-}
}

passed=0 failed=0 skipped=0
declare -A count
now_passing=() failing=()
cat "$work"/results/* | sort >"$work/all.tsv"
cp "$work/all.tsv" "$logroot/results.tsv"
while IFS=$'\t' read -r t u outcome ms reason; do
  count[$outcome]=$((${count[$outcome]-0} + 1))
  secs=$(printf '%d.%01d' $((ms / 1000)) $((ms % 1000 / 100)))
  if ((peer)); then
    case $outcome in
      pass) passed=$((passed + 1)); line="pass" ;;
      skip) skipped=$((skipped + 1)); line="!!! SKIPPED: $reason" ;;
      *) failed=$((failed + 1)); failing+=("$t ($u)"); line="!!! FAILED with GNU cp ($outcome): the harness is wrong here" ;;
    esac
  else
    lookup "$t" "$u"
    case $outcome in
      pass)
        passed=$((passed + 1))
        case $kind in
          pass) line="pass" ;;
          '') line="pass !!! not in list.tsv: add it (run.sh --update)" ;;
          *) line="pass !!! listed '$kind' ($note) and passes now: move it to pass (run.sh --update)"
            now_passing+=("$t ($u)") ;;
        esac ;;
      skip)
        skipped=$((skipped + 1))
        case $kind in
          skip) line="skip ($reason)" ;;
          pass) line="!!! SKIPPED (listed pass): $reason" ;;
          '') line="!!! SKIPPED: $reason (not in list.tsv: add it, run.sh --update)" ;;
          *) line="!!! SKIPPED: $reason (listed '$kind')" ;;
        esac ;;
      *)
        case $kind in
          pass) failed=$((failed + 1)); failing+=("$t ($u)"); line="!!! FAILED ($outcome): listed pass" ;;
          '') failed=$((failed + 1)); failing+=("$t ($u)"); line="!!! FAILED ($outcome): not in list.tsv: classify it (run.sh --update)" ;;
          skip) skipped=$((skipped + 1)); line="known: $outcome, listed skip ($note)" ;;
          *) skipped=$((skipped + 1)); count[known_$kind]=$((${count[known_$kind]-0} + 1))
            line="known $kind: $note" ;;
        esac ;;
    esac
  fi
  printf '%-34s %-6s %6ss  %s\n' "$t" "$u" "$secs" "$line"
done <"$work/all.tsv"

# --- --update: the list from this run --------------------------------------
# The option a failing test stopped at, from kopiru's refusal in its log.
refused_option() {
  grep -v '^++* ' "$1" | grep -m1 -oE "unexpected argument '[^']+'|unknown --[a-z-]+ item '[^']+'|invalid value '[^']*' for '[^']+'|argument '[^']+' cannot be used multiple times" |
    sed -E "s/^unexpected argument '([^']+)'/\1/; s/^unknown (--[a-z-]+) item '([^']+)'/\1=\2/; s/^invalid value '([^']*)' for '([^ ']+).*/\2=\1/; s/^argument '([^'[]+).*' cannot be used multiple times/\1 given twice/" || true
}
if ((update)); then
  declare -A new_kind new_note
  while IFS=$'\t' read -r t u outcome ms reason; do
    lookup "$t" "$u"
    case $outcome in
      pass) k=pass n= ;;
      skip)
        if [[ $kind == skip && -n $note ]]; then k=skip n=$note; else k=skip n=$reason; fi ;;
      *)
        if [[ -n $kind && $kind != pass && $kind != skip ]]; then
          k=$kind n=$note
          # Once the option is taken, the test may fail for another reason.
          if [[ $kind == option && -z $(refused_option "$logroot/$u/${t//\//-}.log") ]]; then
            echo "!!! $t as $u: listed option ($note), but its log shows no option refused (or the test hides cp's stderr): check it"
          fi
        else
          opt=$(refused_option "$logroot/$u/${t//\//-}.log")
          if [[ -n $opt ]]; then
            k=option n=$opt
          else
            k=disk n="UNCLASSIFIED ($outcome): see target/gnu-cp/kopiru/$u/${t//\//-}.log"
            echo "!!! $t as $u: new failure filed as disk, UNCLASSIFIED: classify it by hand"
          fi
        fi ;;
    esac
    new_kind[$t/$u]=$k
    new_note[$t/$u]=$n
  done <"$work/all.tsv"
  # Users not run this time keep their old entries.
  for t in "${all_tests[@]}"; do
    for u in root nobody; do
      [[ -n ${new_kind[$t/$u]+x} ]] && continue
      lookup "$t" "$u"
      [[ -n $kind ]] || continue
      new_kind[$t/$u]=$kind
      new_note[$t/$u]=$note
    done
  done
  {
    cat <<EOF
# GNU coreutils $upstream's cp tests (tests/cp, and the cp cases of tests/misc and
# tests/mv) against kopiru cp, as tests/peers/gnu-cp/run.sh runs them; it reads
# this list, and rewrites it with --update (keeping the NOTEs).
# TEST<TAB>USER<TAB>LIST<TAB>NOTE. USER: root, nobody, or both. LIST:
#   pass     passes against kopiru (a failure is counted failed)
#   option   stops at an option kopiru does not take (NOTE names it)
#   wording  differs only in what cp prints or its exit status, not on disk
#   disk     differs in what ends up on disk, deliberately and losing nothing
#            (NOTE: what; docs/copy.md "Differences from cp and rsync" names
#            each such test, tests/peers/check-differences.py checks it)
#   bug      fails on a kopiru bug, to be fixed (NOTE: the bug; FINDINGS.md
#            has reproductions)
#   skip     skipped on this machine even with GNU cp (NOTE: why)
# The tests of the last five are counted skipped; one that passes is
# reported ("move it to pass").
EOF
    for t in "${all_tests[@]}"; do
      r=${new_kind[$t/root]-} ro=${new_note[$t/root]-}
      b=${new_kind[$t/nobody]-} bo=${new_note[$t/nobody]-}
      if [[ -n $r && $r == "$b" && $ro == "$bo" ]]; then
        printf '%s\tboth\t%s\t%s\n' "$t" "$r" "$ro"
      else
        [[ -n $r ]] && printf '%s\troot\t%s\t%s\n' "$t" "$r" "$ro"
        [[ -n $b ]] && printf '%s\tnobody\t%s\t%s\n' "$t" "$b" "$bo"
      fi
    done
  } >"$list.tmp"
  mv "$list.tmp" "$list"
  echo "rewrote $list"
fi

elapsed=$(((t1 - t0) / 1000000))
echo "== $what: ${count[pass]-0} pass, ${count[fail]-0} fail, ${count[error]-0} hard error (99), ${count[timeout]-0} timeout, ${count[skip]-0} skip (77) in $((elapsed / 1000)).$((elapsed % 1000 / 100))s; logs in $logroot"
if ((!peer)); then
  echo "== known differences (listed, counted skipped): ${count[known_option]-0} option, ${count[known_wording]-0} wording, ${count[known_disk]-0} disk, ${count[known_bug]-0} bug"
fi
if ((${#now_passing[@]})); then
  echo "!!! ${#now_passing[@]} listed as known differences pass now, move them to pass (run.sh --update): ${now_passing[*]}"
fi
if ((${#failing[@]})); then
  echo "!!! FAILED (logs: target/gnu-cp/$mode/USER/DIR-TEST.log): ${failing[*]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
