#!/bin/sh
# darwin_compile_test.sh: the macOS compile check. No Mac and no Apple SDK here: clang targets
# x86_64-apple-darwin20 over this machine's (glibc) headers, with stand-ins (darwin_stub/) for the
# Apple headers that libuv's uv/darwin.h needs, and wrappers of glibc's pthread.h, sys/socket.h and
# netinet/tcp.h that take away (#pragma GCC poison) what glibc declares and macOS lacks
# (pthread_condattr_setclock, SOCK_CLOEXEC, TCP_CONGESTION) and declare what only Apple's headers
# have (pthread_cond_timedwait_relative_np, SO_NOSIGPIPE). It type-checks every library source as
# the macOS build picks them (the *_darwin.c member of a platform family, else the *_posix.c one,
# else *_none.c, the body for platforms without the feature;
# never *_linux.c or *_win32.c), plus threadpark_posix.c, which Bazel builds on every platform
# (//threadpark:threadpark_fallback), with -Wall -Wextra -Werror: Apple's clang warnings such as
# -Wfor-loop-analysis, the __APPLE__ branches and the darwin files compile. What it cannot see:
# the rest of what glibc declares and macOS lacks (only the names above are taken away), and
# nothing here ever ran on a Mac.
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
    *_none.c) [ -f "${f%_none.c}_darwin.c" ] || [ -f "${f%_none.c}_posix.c" ] && continue ;;
    esac
    files="$files $f"
done
files="$files threadpark/threadpark_posix.c" # the fallback: built everywhere, macOS included
check() {
    clang -target x86_64-apple-darwin20 -fsyntax-only -std=c11 -Wall -Wextra -Werror \
        -D_DEFAULT_SOURCE -DXXH_INLINE_ALL -U__nonnull -I. -Iinclude -Itests/platforms/darwin_stub \
        -isystem /usr/include -isystem /usr/include/x86_64-linux-gnu "$@"
}
# The stand-ins must not hide what macOS lacks: each of these must fail to compile.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
i=0
for body in \
    '#include <pthread.h>
#include <time.h>
int f(pthread_condattr_t *a) { return pthread_condattr_setclock(a, CLOCK_MONOTONIC); }' \
    '#include <sys/socket.h>
int f(void) { return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }' \
    '#include <netinet/tcp.h>
int f(void) { return TCP_CONGESTION; }'; do
    i=$((i + 1))
    printf '%s\n' "$body" >"$tmp/lacks$i.c"
    if check "$tmp/lacks$i.c" 2>/dev/null; then
        echo "FAIL: the stand-ins hide what macOS lacks: this compiled:"
        cat "$tmp/lacks$i.c"
        exit 1
    fi
done
n=0
fail=0
for f in $files; do
    n=$((n + 1))
    if ! check "$f"; then
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
