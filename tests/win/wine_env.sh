# wine_env.sh (sourced): the wine prefix of a test. By default one per user and source tree under
# /tmp, shared by the wine tests of a run: its first start costs ~7 s, later ones ~1 s; made under a lock
# (tests run in parallel) and replaced when a half-made one is found. WINE_OWN_PREFIX=1: a prefix
# (and so a wine server) of this test's own, under TEST_TMPDIR: the mixed runs, whose wine
# programs stalled, and twice hung, while another test's programs loaded a shared server
# (docs/platforms.md).
export WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
if [ "${WINE_OWN_PREFIX:-0}" = 1 ] && [ -n "${TEST_TMPDIR:-}" ]; then
    base="$TEST_TMPDIR"
else
    base="${TMPDIR:-/tmp}"
fi
# One prefix per source tree (the caller's $root): two checkouts testing at once (a CI clone
# beside a working tree) must not share a server, one's restart stalling the other's programs.
tree=$(printf '%s' "${root:-}" | cksum | cut -d' ' -f1)
export WINEPREFIX="$base/pccl-wine-$(id -u)-$tree"
(
    flock 9
    if [ ! -f "$WINEPREFIX/.pccl-ready" ]; then
        rm -rf "$WINEPREFIX"
        wineboot -i >/dev/null 2>&1 && wineserver -w && touch "$WINEPREFIX/.pccl-ready"
    fi
) 9>"$base/pccl-wine-$(id -u)-$tree.lock"
# One server for the prefix, kept 20 s after its last client: wine programs started one after the
# other skip the server's start, and none meets a server that is shutting down.
wineserver -p20 >/dev/null 2>&1 || true
