# wine_env.sh (sourced): one WINEPREFIX per user under /tmp, shared by the wine tests of a run:
# its first start costs ~7 s, later ones ~1 s. Made under a lock (tests run in parallel), and
# replaced when a half-made one is found.
export WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
export WINEPREFIX="${TMPDIR:-/tmp}/pccl-wine-$(id -u)"
(
    flock 9
    if [ ! -f "$WINEPREFIX/.pccl-ready" ]; then
        rm -rf "$WINEPREFIX"
        wineboot -i >/dev/null 2>&1 && wineserver -w && touch "$WINEPREFIX/.pccl-ready"
    fi
) 9>"${TMPDIR:-/tmp}/pccl-wine-$(id -u).lock"
# One server for the run, kept 20 s after its last client: wine programs started one after the
# other skip the server's start, and none meets a server that is shutting down.
wineserver -p20 >/dev/null 2>&1 || true
