#!/bin/sh
# win_libuv.sh [CACHE]: libuv for Windows, cross-built with mingw-w64 into CACHE/libuv-win
# (include/, lib/libuv.a). Debian ships no mingw libuv, so this fetches Debian's own source
# package of libuv1 (the version the Linux build uses, with Debian's patches) through apt with a
# private deb-src list, once; later runs are offline. The source never enters the tree.
set -eu
cache=${1:-.cache}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
prefix="$cache/libuv-win"
[ -f "$prefix/lib/libuv.a" ] && [ -f "$prefix/include/uv.h" ] && exit 0

src="$cache/libuv-src"
if ! ls "$src"/libuv1_*.orig.tar.gz >/dev/null 2>&1; then
    # A private apt state (lists, cache, sources) under the cache: the system's lists stay untouched.
    apt="$cache/apt"
    mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$src"
    suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    echo "deb-src http://deb.debian.org/debian $suite main" > "$apt/sources.list"
    set -- -o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt" -o APT::Sandbox::User=root
    echo "win_libuv: fetching Debian's libuv1 source package (once)" >&2
    apt-get -qq "$@" update
    (cd "$src" && apt-get -qq "$@" source --download-only libuv1)
fi

work="$cache/libuv-build"
rm -rf "$work"
mkdir -p "$work"
tar -xzf "$(ls "$src"/libuv1_*.orig.tar.gz | head -n1)" -C "$work"
tree=$(ls -d "$work"/libuv*/ | head -n1)
tree=${tree%/}
deb=$(ls "$src"/libuv1_*.debian.tar.* | head -n1)
tar -xf "$deb" -C "$tree"
if [ -f "$tree/debian/patches/series" ]; then
    grep -v '^#' "$tree/debian/patches/series" | while read -r p; do
        [ -n "$p" ] && patch -s -d "$tree" -p1 < "$tree/debian/patches/$p"
    done
fi

cat > "$work/mingw.cmake" <<'TC'
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
TC
echo "win_libuv: building libuv for Windows (mingw-w64)" >&2
# libuv's own warnings are not ours: the log is shown only when the build fails.
log="$cache/libuv-build.log"
if ! { cmake -S "$tree" -B "$work/out" -DCMAKE_TOOLCHAIN_FILE="$work/mingw.cmake" \
        -DCMAKE_BUILD_TYPE=Release -DLIBUV_BUILD_TESTS=OFF -DLIBUV_BUILD_BENCH=OFF \
        -DCMAKE_INSTALL_PREFIX="$prefix" &&
       cmake --build "$work/out" --target uv_a -j "$(nproc)"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "win_libuv: the libuv build failed (log: $log)" >&2
    exit 1
fi
rm -rf "$prefix"
mkdir -p "$prefix/lib"
cp -r "$tree/include" "$prefix/include"
cp "$work/out/libuv_a.a" "$prefix/lib/libuv.a" 2>/dev/null || cp "$work/out/libuv.a" "$prefix/lib/libuv.a"
rm -rf "$work"
echo "win_libuv: $prefix" >&2
