#!/usr/bin/env bash
# `kopiru gui` in Debian's Chromium (headless, Selenium + chromedriver) and
# its security as raw HTTP: tests/gui/test_gui.py, as root and as an
# ordinary user whose helper runs through `sudo -n`. Installs what it needs
# as root on Debian (chromium, chromium-driver, python3-selenium, sudo,
# xz-utils, zstd, e2fsprogs; axe-core from npm, cached in
# ~/.cache/kopiru-test). Ends with one line: N passed, N failed, N skipped.
#
# usage: KOPIRU=path/to/kopiru tests/gui/run.sh   [default: target/debug/kopiru]
#        GUI_SCREENSHOT=docs/gui.png tests/gui/run.sh   (also saves the README's picture)
set -euo pipefail
cd "$(dirname "$0")/../.."
kopiru=${KOPIRU:-$PWD/target/debug/kopiru}
skip() { echo "!!!!!!!! SKIPPED: gui: $1"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
[[ $(id -u) == 0 ]] || skip "needs root (loop devices, a test user)"
[[ -x $kopiru ]] || { echo "kopiru not built: $kopiru"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
"$kopiru" gui --help >/dev/null 2>&1 || skip "this kopiru is built without the gui feature"
need=()
[[ -x /usr/bin/chromium ]] || need+=(chromium)
[[ -x /usr/bin/chromedriver ]] || need+=(chromium-driver)
/usr/bin/python3 -c 'import selenium' 2>/dev/null || need+=(python3-selenium)
command -v sudo >/dev/null || need+=(sudo)
command -v xz >/dev/null || need+=(xz-utils)
command -v zstd >/dev/null || need+=(zstd)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v losetup >/dev/null || need+=(mount)
# npm only to fetch axe-core once (then cached).
axe_version=4.11.0
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kopiru-test/axe-core-$axe_version
axe=$cache/axe.min.js
[[ -s $axe ]] || command -v npm >/dev/null || need+=(npm)
if ((${#need[@]})); then
  command -v apt-get >/dev/null || skip "missing ${need[*]} and no apt-get to install them"
  echo "installing ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# axe-core, pinned, from the npm registry (npm checks its integrity).
if [[ ! -s $axe ]]; then
  mkdir -p "$cache"
  if (cd "$cache" && npm pack --silent "axe-core@$axe_version" >/dev/null 2>&1 \
      && tar -xzf "axe-core-$axe_version.tgz" -C "$cache" package/axe.min.js \
      && mv package/axe.min.js "$axe" && rmdir package); then :; else
    echo "!!! axe-core could not be fetched: its checks will be skipped" >&2
  fi
fi
# The user's server runs the binary through sudo: a copy where that user
# may run it and not change it (root's, mode 755), named in the sudoers rule.
bin=/var/tmp/kopiru-gui-bin
rm -rf "$bin" && mkdir -m 755 "$bin"
cp "$kopiru" "$bin/kopiru" && chmod 755 "$bin/kopiru"
trap 'rm -rf "$bin"' EXIT
args=(--kopiru "$bin/kopiru" --axe "$axe")
[[ -n ${GUI_SCREENSHOT:-} ]] && args+=(--screenshot "$(realpath -m "$GUI_SCREENSHOT")")
/usr/bin/python3 tests/gui/test_gui.py "${args[@]}" "$@"
