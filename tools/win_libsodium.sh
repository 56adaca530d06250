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

src="$cache/libsodium-src"
if ! ls "$src"/libsodium_*.orig.tar.* >/dev/null 2>&1; then
    apt="$cache/apt"
    mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$src"
    suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    echo "deb-src http://deb.debian.org/debian $suite main" > "$apt/sources.list"
    set -- -o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt" -o APT::Sandbox::User=root
    echo "win_libsodium: fetching Debian's libsodium source package (once)" >&2
    ls "$apt/lists"/*Sources* >/dev/null 2>&1 || apt-get -qq "$@" update
    (cd "$src" && apt-get -qq "$@" source --download-only libsodium) ||
        { apt-get -qq "$@" update && (cd "$src" && apt-get -qq "$@" source --download-only libsodium); }
fi

work="$cache/libsodium-build"
rm -rf "$work"
mkdir -p "$work"
tar -xf "$(ls "$src"/libsodium_*.orig.tar.* | head -n1)" -C "$work"
tree=$(ls -d "$work"/libsodium*/ | head -n1)
tree=${tree%/}
deb=$(ls "$src"/libsodium_*.debian.tar.* | head -n1)
tar -xf "$deb" -C "$tree"
if [ -f "$tree/debian/patches/series" ]; then
    grep -v '^#' "$tree/debian/patches/series" | while read -r p; do
        [ -n "$p" ] && patch -s -d "$tree" -p1 < "$tree/debian/patches/$p"
    done
fi

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
