#!/bin/sh
# win_libsodium.sh [CACHE]: libsodium for Windows, cross-built with mingw-w64 into
# CACHE/libsodium-win (include/, lib/libsodium.a), static only. Like tools/win_libuv.sh: Debian
# ships no mingw libsodium, so this fetches Debian's own source package (the version the Linux
# build links, with Debian's patches) through apt with a private deb-src list, once; later runs
# are offline. The source never enters the tree.
set -eu
cache=${1:-.cache}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
prefix="$cache/libsodium-win"
[ -f "$prefix/lib/libsodium.a" ] && [ -f "$prefix/include/sodium.h" ] && exit 0

tree=$(sh "$(dirname "$0")/debian_source.sh" "$cache" libsodium libsodium)
work="$cache/libsodium-build"

echo "win_libsodium: building libsodium for Windows (mingw-w64, static)" >&2
log="$cache/libsodium-build.log"
# Debian's orig tarball is the git tree: no configure script until autogen (autoconf, automake,
# libtool: tools/deps.sh installs them).
if ! { cd "$tree" &&
       { [ -x configure ] || ./autogen.sh -s || autoreconf -fi; } &&
       ./configure --host=x86_64-w64-mingw32 --disable-shared --enable-static --disable-dependency-tracking \
           --prefix="$prefix.tmp" &&
       make -j "$(nproc)" &&
       rm -rf "$prefix.tmp" && make install; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "win_libsodium: the libsodium build failed (log: $log)" >&2
    exit 1
fi
cd "$cache"
rm -rf "$prefix"
mkdir -p "$prefix/lib"
cp -r "$prefix.tmp/include" "$prefix/include"
cp "$prefix.tmp/lib/libsodium.a" "$prefix/lib/libsodium.a"
rm -rf "$prefix.tmp" "$work"
echo "win_libsodium: $prefix" >&2
