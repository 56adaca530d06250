#!/bin/sh
# install.sh PREFIX BUILD_DIR VERSION: copies libraries, headers, binaries and a pccl.pc.
# Used by `make install` and by tests/install (which cannot call Bazel from inside a test).
set -eu
prefix=$1 build=$2 version=$3
here=$(dirname "$0")/..
install -d "$prefix/lib/pkgconfig" "$prefix/include" "$prefix/bin"
install -m 0755 "$build/lib/libpccl.so" "$prefix/lib/"
install -m 0644 "$build/lib/libpccl.a" "$prefix/lib/"
install -m 0644 "$build/include/pccl.h" "$build/include/ccoip.h" "$build/include/ccoip_inet.h" "$build/include/pccl_profiler.h" "$prefix/include/"
for b in "$build"/bin/*; do
    [ -f "$b" ] && install -m 0755 "$b" "$prefix/bin/"
done
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$here/pccl.pc.in" > "$prefix/lib/pkgconfig/pccl.pc"
echo "installed libpccl $version into $prefix"
