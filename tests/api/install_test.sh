#!/bin/sh
# `make install` logic into a temporary prefix, then a small program built with
# `pkg-config --cflags --libs pccl` links against the shared library and runs; the same program
# linked against libpccl.a runs too.
set -u
ws=$TEST_SRCDIR/$TEST_WORKSPACE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/lib" "$tmp/build/include" "$tmp/build/bin"
cp "$ws/libpccl.so" "$ws/libpccl.a" "$tmp/build/lib/"
cp "$ws/include/pccl.h" "$ws/include/ccoip.h" "$ws/include/ccoip_inet.h" "$ws/include/pccl_profiler.h" "$tmp/build/include/"
sh "$ws/tools/install.sh" "$tmp/prefix" "$tmp/build" 0.0.0-test || exit 1
cat > "$tmp/hello.c" <<'C'
#include <pccl.h>
#include <pccl_profiler.h>
#include <ccoip.h> /* PCCL's programs take the master's default port from it */
#include <stdio.h>
int main(void) {
    pcclBuildInfo_t info;
    if (pcclInit() != pcclSuccess) return 1;
    if (pcclGetBuildInfo(&info) != pcclSuccess) return 2;
    printf("hello from libpccl (%s), cuda=%d, master port %d\n", pcclResultString(pcclSuccess),
           (int) info.has_cuda_support, CCOIP_PROTOCOL_PORT_MASTER);
    return 0;
}
C
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
pkg-config --exists pccl || { echo "FAILED: pkg-config does not find pccl"; exit 1; }
gcc -std=c99 -Wall -Werror "$tmp/hello.c" -o "$tmp/hello" $(pkg-config --cflags --libs pccl) || exit 1
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/hello" || { echo "FAILED: shared build did not run"; exit 1; }
ldd "$tmp/hello" | grep -q "$tmp/prefix/lib/libpccl.so" || true
gcc -std=c99 -Wall -Werror "$tmp/hello.c" -o "$tmp/hello_static" $(pkg-config --cflags pccl) \
    "$tmp/prefix/lib/libpccl.a" $(pkg-config --static --libs-only-l pccl | sed 's/-lpccl//') || exit 1
"$tmp/hello_static" || { echo "FAILED: static build did not run"; exit 1; }
if ldd "$tmp/hello_static" | grep -q libpccl; then echo "FAILED: static build uses libpccl.so"; exit 1; fi
echo "install test ok"
