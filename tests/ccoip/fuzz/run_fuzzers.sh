#!/bin/sh
# Builds every ccoip fuzz target with Debian's clang (libFuzzer + ASan + UBSan) and runs each for
# FUZZ_SECONDS (default 20). Fails on any crash, leak or sanitizer report.
# Usage (Bazel passes the sources as arguments): run_fuzzers.sh SRC...
set -eu
secs=${FUZZ_SECONDS:-20}
CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null 2>&1 || { echo "fuzz: $CLANG not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/ccoip_fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
codec=""
targets=""
inc=""
for f in "$@"; do
    case "$f" in
    */fuzz_*.c) targets="$targets $f" ;;
    *.c) codec="$codec $f" ;;
    *.h) d=$(dirname "$f"); inc="$inc -I$d -I$d/.." ;;
    esac
done
failed=0
for t in $targets; do
    name=$(basename "$t" .c)
    "$CLANG" -std=c11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        $inc -o "$work/$name" "$t" $codec -lsodium -lcrypto
    mkdir -p "$work/$name.corpus"
    echo "fuzz: running $name for ${secs}s" >&2
    if ! (cd "$work" && "./$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
            "$name.corpus" 2>"$name.log"); then
        echo "fuzz: $name FAILED" >&2
        tail -n 60 "$work/$name.log" >&2
        failed=1
    else
        grep -E "stat::number_of_executed_units|Done" "$work/$name.log" >&2 || true
    fi
done
exit $failed
