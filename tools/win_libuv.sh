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

tree=$(sh "$(dirname "$0")/debian_source.sh" "$cache" libuv1 libuv)
work="$cache/libuv-build"

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
