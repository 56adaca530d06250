# wine_env.sh (sourced): a wine prefix, and so a wine server, of this test's own; wine_env_cleanup
# stops that server. Every test has its own: with one server shared by the tests of a run, a wine
# program sometimes hung for good (4 runs in 1118 under `bazel test`, 2 at a time): it was a
# client of a server that had exited, blocked reading its own wait pipe, while a newer server ran
# the other tests (tests/win/win_unit_test.sh shows such a hang's threads; docs/platforms.md).
# The prefix is a copy of a template made once per user and source tree under /tmp (wineboot,
# ~7 s, under a lock; replaced when a half-made one is found): hard links, but the registry files,
# which wine rewrites, copied, and without the template's record of its server's directory, so
# that wine makes one for this prefix. ~0.1 s, then ~0.6 s for the server's first start.
export WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
tmp_base="${TMPDIR:-/tmp}"
# Removes the server directory of prefix $1: wine keeps its name (wine-XXXXXX, under TMPDIR) in
# the prefix's file "wineserver"; any other content is left alone.
wine_env_server_dir_rm() {
    wine_env_name=$(cat "$1/wineserver" 2>/dev/null)
    case $wine_env_name in wine-[A-Za-z0-9]*) rm -rf "${tmp_base:?}/$wine_env_name" ;; esac
}
# One template per source tree (the caller's $root): two checkouts testing at once never share one
# while it is being made.
tree=$(printf '%s' "${root:-}" | cksum | cut -d' ' -f1)
template="$tmp_base/pccl-wine-template-$(id -u)-$tree"
(
    flock 9
    if [ ! -f "$template/.pccl-ready" ]; then
        rm -rf "$template"
        export WINEPREFIX="$template"
        wineboot -i >/dev/null 2>&1 && wineserver -w || exit 1
        wine_env_server_dir_rm "$template"
        rm -f "$template/wineserver"
        touch "$template/.pccl-ready"
    fi
) 9>"$template.lock" || { echo "FAIL: wineboot could not make the wine prefix $template"; exit 1; }
if [ -n "${TEST_TMPDIR:-}" ]; then
    wine_own_dir="$TEST_TMPDIR/wine"
    rm -rf "$wine_own_dir"
    mkdir -p "$wine_own_dir"
else
    wine_own_dir=$(mktemp -d)
fi
export WINEPREFIX="$wine_own_dir/prefix"
# Hard links need one file system; elsewhere a full copy (~0.3 s from the page cache).
cp -al "$template" "$WINEPREFIX" 2>/dev/null || { rm -rf "$WINEPREFIX"; cp -a "$template" "$WINEPREFIX"; }
for f in "$template"/*.reg; do cp --remove-destination "$f" "$WINEPREFIX/"; done
rm -f "$WINEPREFIX/.pccl-ready"
# Kept 60 s after its last program: a test's programs that start seconds apart (the mixed runs)
# never meet a server that is shutting down; wine_env_cleanup stops it at the test's end.
wineserver -p60 >/dev/null 2>&1 || true

# Stops this prefix's server and its programs, and removes the server's directory and the prefix.
wine_env_cleanup() {
    wineserver -k >/dev/null 2>&1
    wine_env_server_dir_rm "$WINEPREFIX"
    rm -rf "$wine_own_dir"
}
