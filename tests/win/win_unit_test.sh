#!/bin/sh
# win_unit_test.sh NAME: runs the unit test NAME as `make windows` cross-built it
# (build/win/tests/unit/NAME.exe, from tests/*/NAME.c) under wine: the library's code paths that
# need no Linux-only feature, compiled by mingw-w64 and run on Windows' CRT and threads.
# Skipped, with a line saying so, only where wine or mingw-w64 is missing.
set -u
name=$1
if ! command -v wine >/dev/null 2>&1 || ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
    echo "SKIPPED: wine/mingw missing"
    exit 0
fi
here=$(readlink -f "$0")
root=${here%/tests/win/win_unit_test.sh}
exe="$root/build/win/tests/unit/$name.exe"
[ -f "$exe" ] || { echo "FAIL: $exe missing: run 'make windows' first (make test does)"; exit 1; }
src=$(find "$root/tests" -name "$name.c" | head -n 1)
stale=$(find "$root/ccoip" "$root/reduce" "$root/log" "$root/hash" "$root/threadpark" "$root/include" $src \
    -name '*.[ch]' -newer "$root/build/win/.built" 2>/dev/null | head -n 3)
[ -z "$stale" ] || { echo "FAIL: $exe is older than $stale: run 'make windows'"; exit 1; }

. "$root/tests/win/wine_env.sh"
start=$(date +%s)
timeout -k 5 120 wine "$exe" &
wait $!
rc=$?
echo "$name.exe under wine: exit status $rc after $(($(date +%s) - start)) s"
exit $rc
