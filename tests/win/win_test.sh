#!/bin/sh
# win_test.sh MODE LINUX_MASTER LINUX_AR_PEER LINUX_SS_PEER DRIVER: runs win_mixed_test MODE with
# the Windows programs of `make windows` (build/win of this tree) under wine. Skipped, with a
# line saying so, only where wine or mingw-w64 is missing; missing products are a failure.
set -u
mode=$1
if ! command -v wine >/dev/null 2>&1 || ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
    echo "SKIPPED: wine/mingw missing"
    exit 0
fi
# The tree this test came from: its runfiles link back to the sources.
here=$(readlink -f "$0")
root=${here%/tests/win/win_test.sh}
win="$root/build/win"
for f in bin/pccl-master.exe tests/ar_peer.exe tests/ss_peer.exe tests/pccl.dll; do
    [ -f "$win/$f" ] || { echo "FAIL: $win/$f missing: run 'make windows' first (make test does)"; exit 1; }
done
# Fresh products: the library's sources are no newer than the DLL.
stale=$(find "$root/ccoip" "$root/reduce" "$root/log" "$root/hash" "$root/threadpark" "$root/include" \
    -name '*.[ch]' -newer "$root/build/win/.built" 2>/dev/null | head -n 3)
[ -z "$stale" ] || { echo "FAIL: build/win is older than $stale: run 'make windows'"; exit 1; }

. "$root/tests/win/wine_env.sh"
trap wine_env_cleanup EXIT
trap 'exit 1' INT TERM HUP
echo "wine prefix: $WINEPREFIX"
start=$(date +%s)
# In the background, so that a TERM from the test runner reaches the trap at once.
"$5" "$mode" "$(readlink -f "$2")" "$(readlink -f "$3")" "$(readlink -f "$4")" "$win" &
wait $!
rc=$?
echo "win_mixed_test $mode: exit status $rc after $(($(date +%s) - start)) s"
exit $rc
