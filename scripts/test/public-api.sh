#!/usr/bin/env bash
# The engine's public surface against its committed listing
# (crates/kopiru/public-api.txt), so that a change to what Rust callers can
# name is seen in review: every public item with its signature, as
# cargo-public-api lists it from rustdoc's JSON (blanket and auto-trait
# impls left out; derived impls kept, since callers rely on Clone or Debug).
#
# usage: scripts/test/public-api.sh          check; a difference fails, shown as a diff
#        scripts/test/public-api.sh --bless  write the listing after a deliberate change
#
# rustdoc's JSON is unstable: it is built by the stable toolchain with
# RUSTC_BOOTSTRAP=1 (as the fuzz targets are), and read by a pinned
# cargo-public-api, installed on first use into the test cache (about six
# minutes of building on two cores). A toolchain whose JSON that version
# cannot read makes the check a loud skip, not a pass. Ends with one line:
# N passed, N failed, N skipped.
set -uo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
START=$SECONDS
version=0.52.0
cache=${KOPIRU_TEST_CACHE:-$HOME/.cache/kopiru-test}
root=$cache/cargo-public-api-$version
listing=crates/kopiru/public-api.txt
if [[ ! -x $root/bin/cargo-public-api ]]; then
  echo "installing cargo-public-api $version into $root"
  cargo install --quiet --locked cargo-public-api --version "$version" --root "$root" \
    --target-dir "$cache/cargo-public-api-build" ||
    { skip "cargo-public-api $version could not be installed"; finish; }
fi
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
if ! PATH=$root/bin:$PATH RUSTC_BOOTSTRAP=1 cargo public-api -p kopiru -ss --color never >"$out" 2>"$err"; then
  cat "$err" >&2
  if grep -qi "format.version\|format_version\|unknown variant\|missing field" "$err"; then
    skip "cargo-public-api $version cannot read this toolchain's rustdoc JSON ($(rustc --version))"
  else
    fail "public API: cargo public-api failed"
  fi
  finish
fi
if [[ ${1:-} == --bless ]]; then
  cp "$out" "$listing"
  echo "wrote $listing ($(wc -l <"$listing") lines)"
  exit 0
fi
if diff -u "$listing" "$out"; then
  pass "public API: as listed in $listing ($(wc -l <"$out") lines)"
else
  fail "public API: differs from $listing (above: - listed, + now); if the change is meant, run scripts/test/public-api.sh --bless and commit the listing"
fi
finish
