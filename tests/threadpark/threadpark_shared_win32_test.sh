#!/bin/sh
# threadpark_shared_win32_test.sh: cross-compiles threadpark_shared_win32.c with the shared-word test for
# Windows (mingw-w64) and runs the .exe under wine, in a throwaway WINEPREFIX.
set -u
CC=x86_64-w64-mingw32-gcc
if ! command -v "$CC" >/dev/null 2>&1 || ! command -v wine >/dev/null 2>&1; then
    echo "SKIPPED: wine/mingw missing"
    exit 0
fi

# The sources sit in the runfiles tree under their workspace paths.
root="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-libpccl}"
[ -f "$root/threadpark/threadpark_shared_win32.c" ] || root=.

tmp=$(mktemp -d /tmp/threadpark_shared_win32_test.XXXXXX) || exit 1
cleanup() {
    # wineserver outlives wine by a few seconds; stop this prefix's one before removing it.
    WINEPREFIX="$tmp/prefix" wineserver -k >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

"$CC" -std=c11 -O2 -Wall -Wextra -Werror -I"$root" -o "$tmp/threadpark_shared_test.exe" \
    "$root/tests/threadpark/threadpark_shared_test.c" "$root/threadpark/threadpark_shared_win32.c" || {
    echo "FAIL: cross-compilation"
    exit 1
}

export WINEPREFIX="$tmp/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
start=$(date +%s)
# In the background, so that a TERM from the test runner reaches the trap (and the cleanup) at once.
wine "$tmp/threadpark_shared_test.exe" &
wait $!
rc=$?
echo "wine exit status $rc after $(($(date +%s) - start)) s"
exit $rc
