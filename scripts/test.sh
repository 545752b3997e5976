#!/usr/bin/env bash
# Runs the whole test suite: the Rust tests (library units and end-to-end
# tests on real ext4/XFS/Btrfs loop filesystems), the Node.js binding
# (built, packed, installed into a scratch project, `node --test`), and the
# Windows builds of the command and of the binding under Wine, and the crash
# lab (scripts/test/lab.sh: dm-log-writes replay under Debian's kernel in QEMU,
# docs/LAB.md), the fuzz targets of the parsers of outside bytes
# (scripts/test/fuzz.sh, docs/FUZZING.md), and the release artifacts (scripts/release/build.sh builds them
# into dist/, scripts/test/release.sh installs and runs each without Rust),
# and the peers' own tests: GNU coreutils' cp tests against `kopiru cp`
# (tests/peers/gnu-cp/run.sh) and rsync's testsuite against `kopiru copy`
# where their options overlap (tests/peers/rsync/run.sh: rsync's source from
# Debian, built and cached in ~/.cache/kopiru-test). As root on Debian/Ubuntu it first installs what
# the tests need with apt-get; what cannot run is reported as skipped, with
# the reason, never as passed. Ends with one line: N passed, N failed, N
# skipped (all parts added up).
#
# KOPIRU_TEST_PARTS=rust,api,fuzz,node,windows,lab,release,gnu,rsync,oracle,gui
# chooses parts (default: all). oracle: GNU cp and rsync as oracles on random
# cases (tests/peers/oracle/README.md). With any of gnu, rsync and oracle,
# tests/peers/check-differences.py also runs (a second): every deliberate
# difference those three file is named in docs/copy.md, and only those.
# api: the engine's public surface against crates/kopiru/public-api.txt
# (scripts/test/public-api.sh). gui: `kopiru gui` in Debian's Chromium (Selenium, axe-core) and its
# security as raw HTTP (tests/gui/run.sh).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
parts=${KOPIRU_TEST_PARTS:-rust,api,fuzz,node,windows,lab,release,gnu,rsync,oracle,gui}
has() { [[ ",$parts," == *",$1,"* ]]; }
need mkfs.ext4 e2fsprogs
need mkfs.xfs xfsprogs
need mkfs.btrfs btrfs-progs
need strace strace
need losetup mount
need sfdisk fdisk
need dmsetup dmsetup
need xz xz-utils
need zstd zstd
need bzip2 bzip2
need gzip gzip
need bmaptool bmap-tools
need script bsdutils
need mpirun openmpi-bin
need fpart fpart
need setpriv util-linux
need fusermount3 fuse3
need setfacl acl
need setfattr attr
if has oracle; then
  need rsync rsync
fi
if has gnu || has rsync || has oracle; then
  # tests/peers/check-differences.py, the oracle, rsync's wrapper
  need python3 python3
fi
if has node; then
  need node nodejs
  need npm npm
fi
if has gnu; then
  # What GNU's cp tests call (tests/peers/gnu-cp/run.sh would install them
  # too); dpkg-dev unpacks coreutils' source.
  need dpkg-source dpkg-dev
  need '/usr/sbin/setcap|/sbin/setcap' libcap2-bin
  need /usr/bin/python3 python3
  need gcc gcc
  need valgrind valgrind
fi
install_missing || echo "!!! the tests needing them will be ignored" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
if has rust; then
  echo "== Rust: cargo test --workspace"
  # The simulated share (tests/fs/shares.rs) runs beside kopiru's binary.
  cargo build -p kopiru-slowfs 2>&1 | tee -a "$log" || status=$?
  cargo test --workspace --no-fail-fast "$@" 2>&1 | tee -a "$log" || status=$?
fi
if has api; then
  echo "== the engine's public surface against its listing: scripts/test/public-api.sh"
  bash scripts/test/public-api.sh 2>&1 | tee -a "$log" || status=$?
fi
if has fuzz; then
  echo "== fuzzing the parsers of outside bytes: scripts/test/fuzz.sh"
  bash scripts/test/fuzz.sh 2>&1 | tee -a "$log" || status=$?
fi
if has node; then
  echo "== Node.js binding: bindings/node/scripts/ci.sh"
  if [[ -f bindings/node/scripts/ci.sh ]]; then
    bash bindings/node/scripts/ci.sh 2>&1 | tee -a "$log" || status=$?
  else
    echo "!!!!!!!! SKIPPED: Node.js binding: bindings/node is not in this checkout" | tee -a "$log"
  fi
fi
if has windows; then
  echo "== Windows build under Wine: scripts/test/windows.sh"
  if [[ -f scripts/test/windows.sh ]]; then
    bash scripts/test/windows.sh 2>&1 | tee -a "$log" || status=$?
    echo "== Node.js binding on Windows under Wine: bindings/node/scripts/test-windows.sh"
    bash bindings/node/scripts/test-windows.sh 2>&1 | tee -a "$log" || status=$?
  else
    echo "!!!!!!!! SKIPPED: Windows: scripts/test/windows.sh is not in this checkout" | tee -a "$log"
  fi
fi
if has lab; then
  echo "== crash lab (Debian's kernel under QEMU, dm-log-writes): scripts/test/lab.sh"
  bash scripts/test/lab.sh 2>&1 | tee -a "$log" || status=$?
fi
if has release; then
  echo "== release artifacts: scripts/release/build.sh, then scripts/test/release.sh"
  if bash scripts/release/build.sh 2>&1 | tee -a "$log"; then
    bash scripts/test/release.sh 2>&1 | tee -a "$log" || status=$?
  else
    status=1
    echo "0 passed, 1 failed, 0 skipped" | tee -a "$log"
  fi
fi
# The peers' lists against docs/copy.md's "Differences from cp and rsync".
if has gnu || has rsync || has oracle; then
  echo "== the peers' deliberate differences named in docs/copy.md: tests/peers/check-differences.py"
  python3 tests/peers/check-differences.py 2>&1 | tee -a "$log" || status=$?
fi
# The peers' suites run against the debug binary the Rust part built (built
# here when that part is not chosen).
if has gnu || has rsync || has oracle || has gui; then
  if ! cargo build -p kopiru-cli 2>&1 | tail -n 3 | tee -a "$log"; then
    status=1
    echo "0 passed, 1 failed, 0 skipped" | tee -a "$log"
  fi
fi
if has gnu; then
  echo "== GNU coreutils' cp tests against kopiru cp: tests/peers/gnu-cp/run.sh"
  KOPIRU="$PWD/target/debug/kopiru" bash tests/peers/gnu-cp/run.sh 2>&1 | tee -a "$log" || status=$?
fi
if has rsync; then
  # Installs what it needs itself (dpkg-dev, autoconf, libacl1-dev, ...) and
  # a deb-src entry for `apt-get source rsync`; files each test in its list.
  echo "== rsync's testsuite against kopiru copy: tests/peers/rsync/run.sh"
  KOPIRU="$PWD/target/debug/kopiru" bash tests/peers/rsync/run.sh 2>&1 | tee -a "$log" || status=$?
fi
if has oracle; then
  echo "== the peers as an oracle (GNU cp, rsync): tests/peers/oracle/oracle.py --ci"
  python3 tests/peers/oracle/oracle.py --ci --kopiru "$PWD/target/debug/kopiru" 2>&1 | tee -a "$log" || status=$?
fi
if has gui; then
  # Installs chromium, chromium-driver, python3-selenium and axe-core itself.
  echo "== kopiru gui in a browser, and its security as raw HTTP: tests/gui/run.sh"
  KOPIRU="$PWD/target/debug/kopiru" bash tests/gui/run.sh 2>&1 | tee -a "$log" || status=$?
fi
# One closing line for the whole run. cargo: "test result: ... N passed; N
# failed; N ignored" (ignored = skipped); node --test: "# pass N", "# fail
# N", "# skipped N"; the Windows script: its own "N passed, N failed, N
# skipped" line.
awk '
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
  /^# pass [0-9]+$/ { p += $3 } /^# fail [0-9]+$/ { f += $3 } /^# skipped [0-9]+$/ { s += $3 } /^# todo [0-9]+$/ { s += $3 }
  /^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { p += $1; f += $3; s += $5 }
  END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' "$log"
exit $status
