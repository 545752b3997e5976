#!/usr/bin/env bash
# Builds kopiru's release artifacts into dist/, each with NAME.sha256 beside
# it (`sha256sum -c NAME.sha256` in dist/ checks it):
#
#   kopiru-VERSION-x86_64-unknown-linux-musl.tar.gz    static Linux binary
#   kopiru-VERSION-aarch64-unknown-linux-musl.tar.gz   the same for arm64
#   kopiru_VERSION-1_amd64.deb                          cargo-deb: the static
#       binary, the man pages (kopiru.1, kopiru-copy.1, ...), completions
#       for bash, zsh and fish
#   kopiru-VERSION-x86_64-pc-windows-gnu.zip            kopiru.exe (mingw)
#   npm/kopiru-VERSION.tgz                              the Node.js package,
#       with no native code: it loads the prebuilt package of its platform
#   npm/kopiru-PLATFORM-VERSION.tgz                     one per platform
#       (linux-x64-gnu, linux-x64-musl, linux-arm64-gnu, win32-x64-msvc),
#       napi-rs's layout (bindings/node/npm/PLATFORM), named as
#       bindings/node/package.json's optionalDependencies
#
# Each tarball holds the binary, README.md, CHANGELOG.md, the license
# texts, man/*.1 and complete/ (bash, zsh, fish, elvish, PowerShell); the
# man pages and completions are made by the x86_64 binary itself (`kopiru
# man --dir`, `kopiru completions SHELL`), from the same definitions as
# --help. The binaries are stripped.
#
# As root on Debian it installs what it needs with apt-get (musl-tools,
# gcc-aarch64-linux-gnu and musl-dev:arm64 after `dpkg --add-architecture
# arm64`, gcc-mingw-w64-x86-64, zip), the rustup targets, and cargo-deb
# 3.8.0 with `cargo install`. Not built here: macOS binaries and npm
# packages (no Apple linker or SDK from the registries this project can
# reach).
#
# KOPIRU_RELEASE_PARTS=linux-x64,linux-arm64,deb,windows,npm chooses (default:
# all; every part but windows builds the x86_64 binary, for the man pages).
# CARGO_TARGET_DIR as cargo. Exits non-zero if any chosen part fails.
# On 2 cores: about 13 min from nothing (x86_64 5, aarch64 4, Windows 3,
# cargo-deb's install 2), seconds when nothing changed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT"
parts=${KOPIRU_RELEASE_PARTS:-linux-x64,linux-arm64,deb,windows,npm}
has() { [[ ",$parts," == *",$1,"* ]]; }
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
DIST=$ROOT/dist
TOOLS=$TARGET_DIR/release-tools
X64=x86_64-unknown-linux-musl
A64=aarch64-unknown-linux-musl
WIN=x86_64-pc-windows-gnu
export CARGO_TERM_COLOR=never

say() { echo "== $*"; }

# --- what the build needs ------------------------------------------------
if has linux-x64 || has deb || has linux-arm64; then need musl-gcc musl-tools; fi
if has linux-arm64; then
    need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
    need /usr/lib/aarch64-linux-musl/musl-gcc.specs musl-dev:arm64
fi
if has windows || has npm; then
    need x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64
    need zip zip
fi
if has npm; then
    need musl-gcc musl-tools
    need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
    need npm npm
fi
install_missing || exit 1
targets=()
has linux-x64 && targets+=("$X64")
has deb && targets+=("$X64")
has linux-arm64 && targets+=("$X64" "$A64")
has windows && targets+=("$WIN")
has npm && targets+=(x86_64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-gnu "$WIN")
if command -v rustup >/dev/null; then
    for t in "${targets[@]}"; do
        rustup target list --installed | grep -qx "$t" || rustup target add "$t"
    done
fi
if has deb && ! cargo deb --version >/dev/null 2>&1; then
    say "cargo install cargo-deb (2 min)"
    cargo install --locked --version 3.8.0 cargo-deb
fi

mkdir -p "$DIST" "$TOOLS"
made=()
# NAME: writes NAME.sha256 beside dist/NAME.
checksum() {
    local dir name=${1##*/}
    dir=$DIST/$(dirname "$1")
    (cd "$dir" && sha256sum "$name" >"$name.sha256")
    made+=("$1")
}
# DIR BINARY...: the files every archive holds beside its binary.
fill() {
    local dir=$1
    mkdir -p "$dir"
    cp README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE "$dir/"
}

# The x86_64 binary, built first: it writes the man pages and completions
# for every archive and the .deb.
ASSETS=$TARGET_DIR/$X64/release/assets
if has linux-x64 || has deb || has linux-arm64; then
    say "cargo build --release --target $X64"
    cargo build --release --locked -p kopiru-cli --target "$X64"
    BIN=$TARGET_DIR/$X64/release/kopiru
    # Static: no program interpreter, no shared libraries.
    if readelf -l "$BIN" | grep -q 'INTERP' || readelf -d "$BIN" | grep -q 'NEEDED'; then
        echo "release.sh: $BIN is not static:" >&2
        readelf -d "$BIN" | grep NEEDED >&2 || true
        exit 1
    fi
    rm -rf "$ASSETS"
    mkdir -p "$ASSETS/man" "$ASSETS/complete"
    "$BIN" man --dir "$ASSETS/man"
    # The .deb's copies gzipped, as Debian's policy has them (cargo-deb
    # compresses only the man pages it did not find under target/).
    mkdir -p "$ASSETS/man-gz"
    for m in "$ASSETS"/man/*.1; do gzip -9n <"$m" >"$ASSETS/man-gz/${m##*/}.gz"; done
    "$BIN" completions bash >"$ASSETS/complete/kopiru.bash"
    "$BIN" completions zsh >"$ASSETS/complete/_kopiru"
    "$BIN" completions fish >"$ASSETS/complete/kopiru.fish"
    "$BIN" completions elvish >"$ASSETS/complete/kopiru.elv"
    "$BIN" completions powershell >"$ASSETS/complete/_kopiru.ps1"
fi

# TARGET STRIP: dist/kopiru-VERSION-TARGET.tar.gz.
tarball() {
    local target=$1 strip=$2 name=kopiru-$VERSION-$1
    local stage=$TARGET_DIR/$target/release/stage/$name
    rm -rf "${stage%/*}"
    fill "$stage"
    cp -r "$ASSETS/man" "$ASSETS/complete" "$stage/"
    cp "$TARGET_DIR/$target/release/kopiru" "$stage/"
    "$strip" "$stage/kopiru"
    tar -C "${stage%/*}" --owner=0 --group=0 -czf "$DIST/$name.tar.gz" "$name"
    checksum "$name.tar.gz"
}

if has linux-x64; then
    tarball "$X64" strip
fi

if has linux-arm64; then
    say "cargo build --release --target $A64 (Debian's aarch64-linux-gnu-gcc with musl's specs)"
    # The C parts (liblzma, zstd, BLAKE3's NEON) are compiled against musl's
    # headers, as Debian's musl-gcc does for x86_64.
    cc=$TOOLS/aarch64-linux-musl-gcc
    printf '#!/bin/sh\nexec aarch64-linux-gnu-gcc "$@" -specs /usr/lib/aarch64-linux-musl/musl-gcc.specs\n' >"$cc"
    chmod +x "$cc"
    CC_aarch64_unknown_linux_musl=$cc AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc \
        cargo build --release --locked -p kopiru-cli --target "$A64"
    bin=$TARGET_DIR/$A64/release/kopiru
    if readelf -l "$bin" | grep -q 'INTERP' || readelf -d "$bin" | grep -q 'NEEDED'; then
        echo "release.sh: $bin is not static" >&2
        exit 1
    fi
    tarball "$A64" aarch64-linux-gnu-strip
fi

if has deb; then
    say "cargo deb (the static $X64 binary)"
    rm -f "$DIST"/kopiru_*.deb "$DIST"/kopiru_*.deb.sha256
    deb=$(cargo deb -p kopiru-cli --target "$X64" --no-build --strip --output "$DIST" | tail -1)
    checksum "$(basename "$deb")"
fi

if has windows; then
    say "cargo build --release --target $WIN (mingw)"
    cargo build --release --locked -p kopiru-cli --target "$WIN"
    name=kopiru-$VERSION-$WIN
    stage=$TARGET_DIR/$WIN/release/stage/$name
    rm -rf "${stage%/*}"
    fill "$stage"
    cp "$TARGET_DIR/$WIN/release/kopiru.exe" "$stage/"
    x86_64-w64-mingw32-strip "$stage/kopiru.exe"
    if [ -d "$ASSETS" ]; then cp "$ASSETS/complete/_kopiru.ps1" "$stage/"; fi
    rm -f "$DIST/$name.zip"
    (cd "${stage%/*}" && zip -qr "$DIST/$name.zip" "$name")
    checksum "$name.zip"
fi

# --- npm: the main package and one prebuilt package per platform ----------
# PLATFORM TARGET: the binding built for TARGET with cargo (as `napi build`
# does), stripped, as npm/PLATFORM/kopiru.PLATFORM.node in a staging copy,
# packed into dist/npm/. The musl build links musl's libc dynamically (a
# Node addon is loaded by a dynamically linked node); the Windows one is
# built with mingw, and links N-API from the node.exe that loads it
# (bindings/node/scripts/test-windows.sh says how, and why libnode is
# empty).
node_platform() {
    local plat=$1 t=$2 lib strip=strip
    local out=$STAGE/$plat
    say "the Node.js binding for $t ($plat)"
    case $t in
    x86_64-unknown-linux-gnu) ;; # the host's: built by napi build below
    x86_64-unknown-linux-musl)
        # Rust's unwinder links libgcc_s, which gcc's linker script names
        # as libgcc_s.so.1; musl-gcc does not search the directory that
        # holds it (Alpine's Node has it: package libgcc).
        mkdir -p "$TOOLS/musl-gcc_s"
        ln -sf "$(gcc -print-file-name=libgcc_s.so.1)" "$TOOLS/musl-gcc_s/libgcc_s.so.1"
        CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=-crt-static -L $TOOLS/musl-gcc_s" \
            CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=musl-gcc \
            cargo build --release --locked -p kopiru-node --target "$t" ;;
    aarch64-unknown-linux-gnu)
        strip=aarch64-linux-gnu-strip
        CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
            CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
            cargo build --release --locked -p kopiru-node --target "$t" ;;
    *windows*)
        strip=x86_64-w64-mingw32-strip
        mkdir -p "$STAGE/libnode"
        : >"$STAGE/libnode/libnode.dll"
        x86_64-w64-mingw32-ar rc "$STAGE/libnode/libnode.dll.a"
        LIBNODE_PATH=$STAGE/libnode cargo build --release --locked -p kopiru-node --target "$t" ;;
    esac
    case $t in
    x86_64-unknown-linux-gnu) lib=$STAGE/gen/kopiru.$plat.node ;;
    *windows*) lib=$TARGET_DIR/$t/release/kopiru_node.dll ;;
    *) lib=$TARGET_DIR/$t/release/libkopiru_node.so ;;
    esac
    cp -r "$ROOT/bindings/node/npm/$plat" "$out"
    cp LICENSE-MIT LICENSE-APACHE "$out/"
    cp "$lib" "$out/kopiru.$plat.node"
    "$strip" "$out/kopiru.$plat.node"
    (cd "$out" && npm pack --silent --pack-destination "$DIST/npm" >/dev/null)
    checksum "npm/kopiru-$plat-$VERSION.tgz"
}
if has npm; then
    STAGE=$TARGET_DIR/npm-stage
    rm -rf "$STAGE" "$DIST/npm"
    mkdir -p "$STAGE" "$DIST/npm"
    say "the Node.js binding for the host (napi build: also binding.js and binding.d.ts)"
    (cd bindings/node && { [ -x node_modules/.bin/napi ] || npm ci --no-audit --no-fund --silent; })
    # binding.js is the loader that picks the platform's package.
    (cd bindings/node && node_modules/.bin/napi build --platform --release --strip \
        --js binding.js --dts binding.d.ts --output-dir "$STAGE/gen" >/dev/null)
    node_platform linux-x64-gnu x86_64-unknown-linux-gnu
    node_platform linux-x64-musl x86_64-unknown-linux-musl
    node_platform linux-arm64-gnu aarch64-unknown-linux-gnu
    node_platform win32-x64-msvc "$WIN"
    main=$STAGE/main
    mkdir -p "$main"
    cp bindings/node/{package.json,index.js,index.d.ts,README.md} LICENSE-MIT LICENSE-APACHE "$main/"
    # The loader and its types; no .node: the main package holds no native code.
    cp "$STAGE/gen/binding.js" "$STAGE/gen/binding.d.ts" "$main/"
    (cd "$main" && npm pack --silent --pack-destination "$DIST/npm" >/dev/null)
    if tar -tzf "$DIST/npm/kopiru-$VERSION.tgz" | grep -q '\.node$'; then
        echo "release.sh: the main npm package holds a .node" >&2
        exit 1
    fi
    checksum "npm/kopiru-$VERSION.tgz"
fi

say "dist/ ($((SECONDS - START)) s)"
for f in "${made[@]}"; do
    printf '  %-52s %8s\n' "$f" "$(du -h "$DIST/$f" | cut -f1)"
done
