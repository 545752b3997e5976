#!/usr/bin/env bash
# Fuzzes the engine's parsers of bytes from outside (fuzz/, cargo-fuzz and
# libFuzzer; docs/FUZZING.md says what each target checks): builds every
# target, then runs each for a fixed time over a scratch copy of its
# committed corpus (fuzz/corpus/TARGET), two at a time. A target that finds
# a crash, a panic, a hang or an allocation over the limit fails, and its
# reproducer's path is printed (replay it with `cargo fuzz run TARGET FILE`
# in fuzz/). Ends with one line: N passed, N failed, N skipped.
#
# Needs nothing installed: the libFuzzer flags are stable rustc's with
# RUSTC_BOOTSTRAP=1, and libfuzzer-sys builds libFuzzer with the system's
# C++ compiler. The build goes to ~/.cache/kopiru-test, so a machine that
# ran it before builds only what changed.
#
# KOPIRU_FUZZ_SECONDS: seconds each target runs (default 15: nine targets,
# two at a time, about seventy seconds). KOPIRU_FUZZ_TARGETS: a comma list
# of targets (default: all). KOPIRU_FUZZ_JOBS: targets at once (default 2).
# KOPIRU_FUZZ_BUILD_ARGS: more cargo-fuzz build options (below).
set -uo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
seconds=${KOPIRU_FUZZ_SECONDS:-15}
jobs=${KOPIRU_FUZZ_JOBS:-2}
cache=${KOPIRU_TEST_CACHE:-$HOME/.cache/kopiru-test}

# Each target and the longest input worth trying on it: a parser's input
# as the engine reads it, not more (libFuzzer slows with length).
declare -A max_len=(
  [bmap]=16384        # a bmap of a few hundred ranges
  [sniff]=70000       # the signatures looked for go to byte 0x10048 (Btrfs)
  [decoded_size]=4096 # headers, indexes, trailers: small files of each format
  [http_headers]=512
  [copies_record]=4096
  [files_from]=4096
  [exclude_from]=1024 # each line is a glob compiled to a regex
  [partitions]=32768  # an MBR, a GPT header and 128 entries at 4 KiB sectors
  [temp_names]=255    # a file name
)
all=(bmap sniff decoded_size http_headers copies_record files_from exclude_from partitions temp_names)
IFS=, read -r -a targets <<<"${KOPIRU_FUZZ_TARGETS:-$(
  IFS=,
  echo "${all[*]}"
)}"

skip_all() {
  local t
  for t in "${targets[@]}"; do skip "fuzzing $t: $1"; done
  tally
  exit 0
}

# The build. By default (CI's, a fresh machine's): plain cargo with the
# coverage flags cargo-fuzz passes, no sanitizer, at opt-level 1, with
# debug assertions and overflow checks: 3.5 minutes cold on two busy cores
# where cargo-fuzz's (its install, then an optimized build with
# AddressSanitizer) took 10 to 13. KOPIRU_FUZZ_WITH=cargo-fuzz builds and
# runs with cargo-fuzz instead (AddressSanitizer, libFuzzer's malloc
# limit), for longer runs; docs/FUZZING.md.
export RUSTC_BOOTSTRAP=1
triple=$(rustc -vV | sed -n 's/^host: //p')
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
t0=$SECONDS
if [[ ${KOPIRU_FUZZ_WITH:-cargo} == cargo-fuzz ]]; then
  export PATH=$cache/cargo-fuzz/bin:$PATH
  if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked --root "$cache/cargo-fuzz" >/dev/null 2>&1 ||
      skip_all "cargo-fuzz cannot be installed (cargo install cargo-fuzz --locked)"
    echo "installed cargo-fuzz in $((SECONDS - t0)) s"
  fi
  read -r -a extra <<<"${KOPIRU_FUZZ_BUILD_ARGS:-}"
  echo "== building the fuzz targets (cargo fuzz build)"
  (cd fuzz && cargo fuzz build --release --debug-assertions --target-dir "$cache/fuzz-target" \
    "${extra[@]}" >"$scratch/build.log" 2>&1)
  built=$?
  bin=$cache/fuzz-target/$triple/release
else
  echo "== building the fuzz targets (cargo build, libFuzzer's coverage, no sanitizer)"
  coverage="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
  coverage+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
  coverage+=" -Cllvm-args=-sanitizer-coverage-pc-table"
  coverage+=" -Cllvm-args=-sanitizer-coverage-trace-compares"
  (cd fuzz && RUSTFLAGS="$coverage --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo build --release --bins --target "$triple" --target-dir "$cache/fuzz-plain" \
    >"$scratch/build.log" 2>&1)
  built=$?
  bin=$cache/fuzz-plain/$triple/release
fi
if ((built != 0)); then
  tail -40 "$scratch/build.log"
  for t in "${targets[@]}"; do fail "$t: the fuzz targets do not build"; done
  finish
fi
echo "built in $((SECONDS - t0)) s"

# One target: its corpus copied to the scratch directory (what the run
# finds stays there, not in the repository), then libFuzzer for $seconds.
run() {
  local t=$1 dir=$scratch/$1
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$ROOT/fuzz/corpus/$t/"* "$dir/corpus/" 2>/dev/null
  "$bin/$t" "$dir/corpus" -max_total_time="$seconds" -max_len="${max_len[$t]:-4096}" \
    -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1
  echo $? >"$dir/rc"
}

echo "== fuzzing each target for $seconds s, $jobs at a time"
t0=$SECONDS
for t in "${targets[@]}"; do
  if [[ -z ${max_len[$t]:-} || ! -d fuzz/corpus/$t ]]; then
    echo "!!! unknown target $t" >&2
    continue
  fi
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
  run "$t" &
done
wait
for t in "${targets[@]}"; do
  dir=$scratch/$t
  if [[ ! -f $dir/rc ]]; then
    fail "$t: no such target"
    continue
  fi
  runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$dir/log" | tail -1)
  found=$(find "$dir/artifacts" -type f | head -1)
  if [[ $(cat "$dir/rc") == 0 && -z $found ]]; then
    pass "$t: ${runs:-?} runs in $seconds s, corpus $(find "$dir/corpus" -type f | wc -l) inputs"
  else
    fail "$t (exit $(cat "$dir/rc")):"
    grep -m1 -B2 -A12 -E "panicked|ERROR: libFuzzer|ERROR: AddressSanitizer|==ERROR" "$dir/log" | head -30
    if [[ -n $found ]]; then
      mkdir -p "$cache/fuzz-crashes/$t"
      cp "$found" "$cache/fuzz-crashes/$t/"
      echo "     reproducer: $cache/fuzz-crashes/$t/$(basename "$found")"
      echo "     replay: $bin/$t $cache/fuzz-crashes/$t/$(basename "$found")"
    else
      tail -20 "$dir/log"
    fi
  fi
done
echo "fuzzed in $((SECONDS - t0)) s"
finish
