# shellcheck shell=bash
# One Wine session for a run, sourced by the scripts that run Windows
# builds under Wine (scripts/test/windows.sh,
# bindings/node/scripts/test-windows.sh, scripts/test/release.sh):
#
# - The run gets its own prefix, a copy of a template prefix made once
#   (KOPIRU_WINEPREFIX, default /tmp/kopiru-wineprefix: ~15 s the first
#   time, and again when Wine's version changes). Its ~700 MB of builtin
#   DLLs and programs are hard-linked, the registry and the rest copied,
#   beside the template (one filesystem). A wineserver serves one prefix,
#   so runs side by side never share one: the end of one run, or anyone's
#   `wineserver -k` on the template, cannot reach another run's processes.
#   Made and copied under a lock: two runs never make it at once.
# - One wineserver serves the whole run, started persistent
#   (`wineserver -p`, which returns once it listens). Left to itself,
#   each `wine` starts a server that quits 3 s after its last client
#   exits, and a client that connects as it quits is dropped: "wine client
#   error:0: recvmsg: Connection reset by peer". On a busy machine the gap
#   between two steps of a script reaches those 3 s.
# - wine_session_end (on the script's exit) stops that server and its
#   system processes (`wineserver -k`, then `-w`) and removes the prefix;
#   the next run clears what a killed run left.
#
# Needs WINE (the wine64 loader). wine_session_start sets WINEPREFIX,
# WINEDEBUG and DISPLAY; it says why and returns 1 if Wine cannot start.

WINESERVER=${WINE%/*}/wineserver
WINE_SESSION_PREFIX=

# TEMPLATE ready for this Wine: made with `wineboot --init` and left once
# its server has quit (the registry written), stamped with Wine's version.
wine_template_ready() {
    local tpl=$1 version
    version=$("$WINE" --version 2>/dev/null)
    if [ -f "$tpl/.kopiru-wine-version" ] && [ "$(cat "$tpl/.kopiru-wine-version")" = "$version" ]; then
        return 0
    fi
    echo "making the Wine prefix $tpl ($version, once)"
    WINEPREFIX=$tpl "$WINESERVER" -k 2>/dev/null || true
    rm -rf "$tpl"
    WINEPREFIX=$tpl "$WINE" wineboot --init >/dev/null 2>&1 </dev/null || return 1
    WINEPREFIX=$tpl "$WINESERVER" -w || return 1
    echo "$version" >"$tpl/.kopiru-wine-version"
}

# Copies the prefix TEMPLATE to DEST: the builtin programs and libraries,
# which Wine never writes once the prefix is made, hard-linked; the rest
# (the registry, .ini files, the profile) copied.
wine_prefix_copy() {
    local tpl=$1 dest=$2
    cp -al "$tpl" "$dest" || return 1
    (cd "$tpl" && find . -type f ! \( -iname '*.dll' -o -iname '*.exe' -o -iname '*.nls' \
        -o -iname '*.sys' -o -iname '*.drv' -o -iname '*.ocx' -o -iname '*.cpl' \
        -o -iname '*.acm' -o -iname '*.tlb' -o -iname '*.ds' -o -iname '*.com' \) -print0 |
        xargs -0 -r cp -a --parents --remove-destination -t "$dest")
}

wine_session_start() {
    local tpl=${KOPIRU_WINEPREFIX:-/tmp/kopiru-wineprefix} d lock ok=0
    export WINEDEBUG=-all DISPLAY=
    exec {lock}>"$tpl.lock"
    flock -x "$lock"
    # Prefixes of runs that were killed, and their servers.
    for d in "$tpl".run.*; do
        [ -d "$d" ] || continue
        kill -0 "${d##*.}" 2>/dev/null && continue
        WINEPREFIX=$d "$WINESERVER" -k 2>/dev/null || true
        rm -rf "$d"
    done
    if ! wine_template_ready "$tpl"; then
        echo "!!! Wine cannot make its prefix $tpl"
    elif ! wine_prefix_copy "$tpl" "$tpl.run.$$"; then
        echo "!!! cannot copy the Wine prefix $tpl to $tpl.run.$$"
    else
        ok=1
    fi
    exec {lock}>&-
    [ $ok = 1 ] || return 1
    WINE_SESSION_PREFIX=$tpl.run.$$
    export WINEPREFIX=$WINE_SESSION_PREFIX
    if ! "$WINESERVER" -p 2>/dev/null; then
        echo "!!! wineserver -p did not start for $WINEPREFIX"
        return 1
    fi
    # The session's system processes (services.exe and what it starts)
    # keep the standard error of the Wine process that started them, for
    # as long as the server lives: started here, they hold /dev/null, not
    # a pipe that a caller reads to its end.
    if ! "$WINE" wineboot </dev/null >/dev/null 2>&1; then
        echo "!!! wineboot did not run in $WINEPREFIX"
        return 1
    fi
}

wine_session_end() {
    [ -n "$WINE_SESSION_PREFIX" ] || return 0
    WINEPREFIX=$WINE_SESSION_PREFIX "$WINESERVER" -k 2>/dev/null || true
    WINEPREFIX=$WINE_SESSION_PREFIX "$WINESERVER" -w 2>/dev/null || true
    rm -rf "$WINE_SESSION_PREFIX"
    WINE_SESSION_PREFIX=
}
