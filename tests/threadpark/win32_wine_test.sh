#!/bin/sh
# win32_wine_test.sh TEST_C IMPL_C [LIB...]: cross-compiles a threadpark test (tests/threadpark/
# TEST_C) with a Windows implementation (threadpark/IMPL_C) for Windows (mingw-w64) and runs the
# .exe under wine, in a wine prefix of its own (tests/win/wine_env.sh).
set -u
[ $# -ge 2 ] || { echo "usage: $0 TEST_C IMPL_C [LIB...]"; exit 2; }
test_c=$1 impl_c=$2
shift 2
CC=x86_64-w64-mingw32-gcc
if ! command -v "$CC" >/dev/null 2>&1 || ! command -v wine >/dev/null 2>&1; then
    echo "SKIPPED: wine/mingw missing"
    exit 0
fi

# The sources sit in the runfiles tree under their workspace paths.
root="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-libpccl}"
[ -f "$root/threadpark/$impl_c" ] || root=.

name=$(basename "$test_c" .c)
tmp=$(mktemp -d "/tmp/${name}_win32.XXXXXX") || exit 1
"$CC" -std=c11 -O2 -Wall -Wextra -Werror -I"$root" -o "$tmp/$name.exe" \
    "$root/tests/threadpark/$test_c" "$root/threadpark/$impl_c" "$@" || {
    echo "FAIL: cross-compilation"
    rm -rf "$tmp"
    exit 1
}

# A wine prefix and server of this test's own (tests/win/wine_env.sh), copied from the template of
# the source tree the runfiles link to.
env_sh="$root/tests/win/wine_env.sh"
src=$(readlink -f "$root/tests/threadpark/$test_c")
root=${src%/tests/threadpark/*}
cleanup() {
    ! type wine_env_cleanup >/dev/null 2>&1 || wine_env_cleanup
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
. "$env_sh"

start=$(date +%s)
# In the background, so that a TERM from the test runner reaches the trap (and the cleanup) at once.
wine "$tmp/$name.exe" &
wait $!
rc=$?
echo "wine exit status $rc after $(($(date +%s) - start)) s"
exit $rc
