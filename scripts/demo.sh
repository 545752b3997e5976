#!/usr/bin/env bash
# Builds kopiru and copies a small sample tree (files, a 1 GiB sparse file, a
# symlink, a hard link, a FIFO) with --explain, then prints the JSON summary
# of a second copy. Leaves everything in /tmp/kopiru-demo.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin kopiru
k=target/release/kopiru
demo=/tmp/kopiru-demo
rm -rf "$demo"
mkdir -p "$demo/sample/docs"
cp -r crates "$demo/sample/source-code"
echo "hello from kopiru" > "$demo/sample/docs/hello.txt"
ln -s hello.txt "$demo/sample/docs/link-to-hello"
ln "$demo/sample/docs/hello.txt" "$demo/sample/docs/hard-link-to-hello"
mkfifo "$demo/sample/a-fifo"
truncate -s 1G "$demo/sample/sparse.img"
echo "data in the middle" | dd of="$demo/sample/sparse.img" bs=1 seek=500000000 conv=notrunc status=none
echo "== kopiru copy --explain $demo/sample $demo/copy"
"$k" copy --explain "$demo/sample" "$demo/copy"
echo "== kopiru copy --json (a second copy)"
"$k" copy --json "$demo/sample" "$demo/copy2"
echo "== sparse file: $(du -h "$demo/copy/sparse.img" | cut -f1) allocated for $(du -h --apparent-size "$demo/copy/sparse.img" | cut -f1)"
echo "== kopiru probe $demo"
"$k" probe "$demo"
