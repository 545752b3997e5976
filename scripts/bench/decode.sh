#!/usr/bin/env bash
# Compressed images (issue 19): decoders and flashing.
#
# A SIZE MiB ext4 image filled with real files (copied from /usr/share and
# /usr/lib), compressed as xz -6 (one block), xz -T2 -6 (several blocks),
# xz -9, zstd -19, zstd -19 --long=27 and gzip. Then:
#  1. decode only, to nothing: liblzma and libzstd (one thread, and liblzma's
#     multi-threaded decoder) against lzma-rs and ruzstd, through a scratch
#     crate built in the work directory; wall, CPU and peak RSS.
#  2. flash onto a loop device (backing file in the work directory, direct
#     I/O): kopiru flash (--no-verify, as the others do not verify; and with
#     its read-back), the decompressor piped into `dd iflag=fullblock oflag=direct bs=4M`,
#     and `bmaptool copy --nobmap` where installed. Runs are interleaved
#     (scripts/bench/interleave.py: medians, the compressed image in the page
#     cache before each); peak RSS from /usr/bin/time (for a pipeline: its largest
#     process).
#
# usage: scripts/bench/decode.sh [SIZE_MIB] [RUNS]        (default 256 3)
# FORMATS="xz6 zst19" limits the formats (of xz6 xz6mt xz9 zst19 zst19l gz);
# DECODE=0 skips part 1.
# Needs root (losetup), xz, zstd, gzip, mkfs.ext4, /usr/bin/time (package
# time, installed if missing); bmaptool (bmap-tools) is optional. The images are kept in
# /var/tmp/kopiru-decode-bench for the next run.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT"
mib=${1:-256} runs=${2:-3}
need /usr/bin/time time
install_missing
work=/var/tmp/kopiru-decode-bench
mkdir -p "$work"
k=$(release_kopiru)

# The image: real files, as many as fit with room for ext4's own blocks.
img=$work/ext4-$mib.img
system_files_image "$img" "$mib" 85
declare -A make=(
  [xz6]="xz -6 -T1 -c"
  [xz6mt]="xz -6 -T2 -c"
  [xz9]="xz -9 -T1 -c"
  [zst19]="zstd -q -19 -c"
  [zst19l]="zstd -q -19 --long=27 -c"
  [gz]="gzip -6 -c"
)
read -r -a formats <<< "${FORMATS:-xz6 xz6mt xz9 zst19 zst19l gz}"
# The compressed images, named as bmaptool wants (it goes by the extension).
declare -A c
for f in "${formats[@]}"; do
  c[$f]=${img%.img}-$f.img.${f//[0-9]*/}
  [[ -f ${c[$f]} ]] || { ${make[$f]} "$img" > "${c[$f]}.tmp" && mv "${c[$f]}.tmp" "${c[$f]}"; }
done
ls -l "${img%.img}"* >&2

# 1. Decoders only, into nothing.
crate=$work/dbench
mkdir -p "$crate/src"
cat > "$crate/Cargo.toml" <<'EOF'
[package]
name = "dbench"
version = "0.1.0"
edition = "2021"
[dependencies]
lzma-rs = "0.3"
ruzstd = "0.9"
liblzma = { version = "0.4", features = ["static", "parallel"] }
zstd = { version = "0.13", default-features = false }
[profile.release]
lto = "thin"
[workspace]
EOF
cat > "$crate/src/main.rs" <<'EOF'
//! dbench DECODER FILE [THREADS]: decodes FILE into nothing.
use std::io::{self, BufReader, Read, Write};
struct Null;
impl Write for Null {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> { Ok(b.len()) }
    fn flush(&mut self) -> io::Result<()> { Ok(()) }
}
fn drain(mut r: impl Read) {
    let mut buf = vec![0u8; 2 << 20];
    while r.read(&mut buf).unwrap() > 0 {}
}
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let threads: u32 = a.get(3).map_or(1, |s| s.parse().unwrap());
    let mut r = BufReader::with_capacity(256 << 10, std::fs::File::open(&a[2]).unwrap());
    match a[1].as_str() {
        "lzma-rs" => lzma_rs::xz_decompress(&mut r, &mut Null).unwrap(),
        "ruzstd" => drain(ruzstd::decoding::StreamingDecoder::new(r).unwrap()),
        "liblzma" => {
            let s = if threads > 1 {
                liblzma::stream::MtStreamBuilder::new().threads(threads)
                    .memlimit_threading(256 << 20).memlimit_stop(u64::MAX).decoder()
            } else {
                liblzma::stream::Stream::new_stream_decoder(u64::MAX, 0)
            };
            drain(liblzma::bufread::XzDecoder::new_stream(r, s.unwrap()))
        }
        "zstd" => {
            let mut d = zstd::stream::read::Decoder::with_buffer(r).unwrap();
            d.window_log_max(31).unwrap();
            drain(d)
        }
        d => panic!("unknown decoder {d}"),
    }
}
EOF
(cd "$crate" && CARGO_TARGET_DIR=$crate/target cargo build --release -q)
db=$crate/target/release/dbench
tmp=$(mktemp -d)
RSS_DIR=$tmp
back=$work/target.img
dev=
cleanup() { [[ -n $dev ]] && losetup -d "$dev"; rm -rf "$tmp" "$back"; }
trap cleanup EXIT

has() { [[ " ${formats[*]} " == *" $1 "* ]]; }
[[ ${DECODE:-1} == 0 ]] || echo "== decode only, ${mib} MiB image, medians of $runs interleaved runs"
for f in xz6 xz6mt xz9; do
  [[ ${DECODE:-1} == 0 ]] || ! has $f && continue
  args=("$(timed "$f:lzma-rs" "$db lzma-rs ${c[$f]}")" "$(timed "$f:liblzma" "$db liblzma ${c[$f]} 1")")
  [[ $f == xz6mt ]] && args+=("$(timed "$f:liblzma-mt2" "$db liblzma ${c[$f]} 2")")
  python3 scripts/bench/interleave.py "$runs" "cat ${c[$f]} > /dev/null" "${args[@]}" 2> "$tmp/out" >/dev/null
  report "$tmp/out"
done
for f in zst19 zst19l; do
  [[ ${DECODE:-1} == 0 ]] || ! has $f && continue
  python3 scripts/bench/interleave.py "$runs" "cat ${c[$f]} > /dev/null" \
    "$(timed "$f:ruzstd" "$db ruzstd ${c[$f]}")" "$(timed "$f:libzstd" "$db zstd ${c[$f]}")" \
    2> "$tmp/out" >/dev/null
  report "$tmp/out"
done

# 2. Flash onto a loop device.
truncate -s "$((mib + 16))M" "$back"
dev=$(losetup -f --show --direct-io=on "$back")
echo "== flash onto $dev (loop, direct I/O), ${mib} MiB image, medians of $runs interleaved runs"
declare -A dec=([xz6]="xz -dc" [xz6mt]="xz -dc -T2" [xz9]="xz -dc" [zst19]="zstd -dc --long=27"
  [zst19l]="zstd -dc --long=27" [gz]="gzip -dc")
for f in "${formats[@]}"; do
  echo "${dec[$f]} ${c[$f]} | dd of=$dev iflag=fullblock oflag=direct bs=4M conv=fsync status=none" > "$tmp/pipe-$f.sh"
  args=(
    "$(timed "$f:kopiru" "$k flash --yes --no-progress --no-verify ${c[$f]} $dev")"
    "$(timed "$f:kopiru+verify" "$k flash --yes --no-progress ${c[$f]} $dev")"
    "$(timed "$f:decoder|dd" "bash $tmp/pipe-$f.sh")"
  )
  # Several blocks: also on one thread (--memory 0), to see what threads win.
  [[ $f == xz6mt ]] &&
    args+=("$(timed "$f:kopiru-1thread" "$k flash --yes --no-progress --no-verify --memory 0 ${c[$f]} $dev")")
  command -v bmaptool > /dev/null &&
    args+=("$(timed "$f:bmaptool" "bmaptool -q copy --nobmap ${c[$f]} $dev")")
  python3 scripts/bench/interleave.py "$runs" "cat ${c[$f]} > /dev/null" "${args[@]}" 2> "$tmp/out" >/dev/null
  report "$tmp/out"
  # Whichever ran last left the whole image on the device.
  cmp -s -n "$((mib << 20))" "$img" "$dev" || { echo "  $f: the device differs from the image!"; exit 1; }
done
