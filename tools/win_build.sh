#!/bin/sh
# win_build.sh [OUT]: cross-builds libpccl and pccl-master for Windows (x86-64) with mingw-w64
# into OUT (default build/win): bin/pccl-master.exe, lib/pccl.dll with its import library
# lib/libpccl.dll.a, the static lib/libpccl.a, include/, and the test clients in tests/.
# The sources are the library's as the BUILD files list them (bazel query), with each platform
# family (X_linux.c, X_darwin.c, X_posix.c, X_win32.c) reduced to its X_win32.c, or to X_none.c
# (the body for platforms without the feature) where there is no X_win32.c; CUDA stays off.
# libuv and libsodium come from tools/win_libuv.sh and tools/win_libsodium.sh (Debian's source
# packages, built once into .cache/; offline afterwards). The AEAD is libsodium's on Windows
# (ccoip/wire/ccoip_aead_win32.c): there is no OpenSSL for mingw here.
set -eu
out=${1:-build/win}
cd "$(dirname "$0")/.."
for t in x86_64-w64-mingw32-gcc cmake; do
    command -v "$t" >/dev/null 2>&1 || { echo "win_build: $t missing (tools/deps.sh installs it)" >&2; exit 1; }
done
sh tools/win_libuv.sh .cache
sh tools/win_libsodium.sh .cache

all=$(bazel query --noshow_progress 'kind("source file", deps(//:pccl_all))' 2>/dev/null |
      sed -n 's|^//\([^@]*\):\(.*\.c\)$|\1/\2|p' | sed 's|^/||')
[ -n "$all" ] || { echo "win_build: bazel query listed no sources" >&2; exit 1; }
srcs=""
for f in $all; do
    case $f in
    */cuda_table_cuda.c) continue ;;                 # the CUDA flavour: not on Windows
    *_linux.c | *_darwin.c | *_posix.c)
        w=$(echo "$f" | sed 's/_[a-z]*\.c$/_win32.c/')
        echo "$all" | grep -qx -e "$w" -e "${w%_win32.c}_none.c" ||
            { echo "win_build: $f has no Windows body ($w or ${w%_win32.c}_none.c)" >&2; exit 1; }
        continue ;;
    *_none.c) echo "$all" | grep -qx "${f%_none.c}_win32.c" && continue ;; # Windows has its own
    esac
    srcs="$srcs $f"
done

xxh=.cache/xxhash
mkdir -p "$xxh"
cmp -s /usr/include/xxhash.h "$xxh/xxhash.h" || cp /usr/include/xxhash.h "$xxh/xxhash.h"
make --no-print-directory -s -j "$(nproc)" -f tools/win.mk OUT="$out" UV=.cache/libuv-win SODIUM=.cache/libsodium-win XXH="$xxh" LIB_SRCS="$srcs"
# The wine tests compare the tree's sources with this: newer ones mean build/win is stale.
touch "$out/.built"
echo "built: $out/bin/pccl-master.exe $out/lib/pccl.dll $out/lib/libpccl.dll.a $out/lib/libpccl.a (with libuv.a, libsodium.a beside it) $out/include"
