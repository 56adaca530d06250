#!/bin/sh
# darwin_compile_test.sh: the macOS compile check. No Mac and no Apple SDK here: clang targets
# x86_64-apple-darwin20 over this machine's (glibc) headers, with stand-ins for the three Apple
# headers that libuv's uv/darwin.h and nothing else needs (darwin_stub/). It type-checks every
# library source as the macOS build picks them (the *_darwin.c member of a platform family, else
# the *_posix.c one; never *_linux.c or *_win32.c), with -Wall -Wextra -Werror: Apple's clang
# warnings such as -Wfor-loop-analysis, the __APPLE__ branches and the darwin files compile.
# What it cannot see: anything glibc declares and macOS lacks (pthread_condattr_setclock,
# MSG_NOSIGNAL before macOS 11, SOCK_CLOEXEC), and nothing here ever ran on a Mac.
set -u
if ! command -v clang >/dev/null 2>&1; then
    echo "SKIPPED: clang missing"
    exit 0
fi
here=$(readlink -f "$0")
root=${here%/tests/platforms/darwin_compile_test.sh}
cd "$root" || exit 1
files=""
for f in ccoip/*/*.c reduce/*.c log/*.c hash/*.c threadpark/*.c cuda/*.c profiler/*.c; do
    case $f in
    *_linux.c | *_win32.c | */cuda_table_cuda.c) continue ;;
    *_posix.c) [ -f "${f%_posix.c}_darwin.c" ] && continue ;;
    esac
    files="$files $f"
done
n=0
fail=0
for f in $files; do
    n=$((n + 1))
    if ! clang -target x86_64-apple-darwin20 -fsyntax-only -std=c11 -Wall -Wextra -Werror \
        -D_DEFAULT_SOURCE -DXXH_INLINE_ALL -U__nonnull -I. -Iinclude -Itests/platforms/darwin_stub \
        -isystem /usr/include -isystem /usr/include/x86_64-linux-gnu "$f"; then
        echo "FAIL: $f"
        fail=$((fail + 1))
    fi
done
# _DEFAULT_SOURCE, not the Linux build's _GNU_SOURCE: glibc then declares POSIX and BSD but no GNU
# extension, so that one used outside a Linux file fails here as it would on macOS.
# __nonnull: clang's darwin target predefines it (a nullability keyword); glibc's headers then
# skip their own definition. Undefining it lets glibc define it.
echo "darwin compile check: $n files, $fail failed"
[ "$n" -ge 40 ] && [ "$fail" -eq 0 ]
