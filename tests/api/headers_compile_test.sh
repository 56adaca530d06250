#!/bin/sh
# The public headers compile on their own, strictly, as C99 with gcc and clang and as C++ with g++
# (and clang++ when present).
set -u
inc=$(dirname "$(readlink -f "$TEST_SRCDIR/$TEST_WORKSPACE/include/pccl.h")")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include "pccl.h"\n#include "ccoip.h"\n#include "ccoip.h"\n#include "ccoip_inet.h"\n#include "pccl.h"\n#include "pccl_profiler.h"\n#include "pccl_profiler.h"\nint main(void) { pcclResult_t r = pcclSuccess; return (int) r; }\n' > "$tmp/t.c"
cp "$tmp/t.c" "$tmp/t.cpp"
fail=0
run() {
    if "$@" > "$tmp/log" 2>&1; then
        echo "ok: $*"
    else
        echo "FAILED: $*"; cat "$tmp/log"; fail=1
    fi
}
strict="-Wall -Wextra -Werror -pedantic -I$inc -fsyntax-only"
run gcc -std=c99 $strict "$tmp/t.c"
run gcc -std=c11 $strict "$tmp/t.c"
if command -v clang > /dev/null; then run clang -std=c99 $strict "$tmp/t.c"; else echo "SKIPPED: clang missing"; fi
run g++ -std=c++11 $strict "$tmp/t.cpp"
run g++ -std=c++17 $strict "$tmp/t.cpp"
if command -v clang++ > /dev/null; then run clang++ -std=c++11 $strict "$tmp/t.cpp"; fi
exit $fail
