#!/bin/sh
# bench/run.sh: builds and runs every benchmark under bench/, collects bench/out/results.csv
# (name,value,unit,baseline,ratio) and draws the plots (bench/plot.py).
#
# A benchmark is any cc_binary or sh_binary under //bench/...; it prints CSV rows without a header
# on stdout (anything else goes to stderr) and measures its own baseline in the same run.
set -eu
cd "$(dirname "$0")/.."
mkdir -p bench/out
out=bench/out/results.csv
echo "name,value,unit,baseline,ratio" > "$out"
# Targets tagged "helper" are programs that a benchmark drives, not benchmarks.
targets=$(bazel query 'kind("(cc|sh)_binary", //bench/...) except attr(tags, "helper", //bench/...)' 2>/dev/null | sort)
[ -n "$targets" ] || { echo "bench: no benchmarks found" >&2; exit 1; }
bazel build $targets
failed=0
for t in $targets; do
    bin=bazel-bin/$(echo "$t" | sed -e 's|^//||' -e 's|:|/|')
    echo "== $t" >&2
    if ! "$bin" >> "$out"; then
        echo "bench: $t failed" >&2
        failed=1
    fi
done
column -s, -t < "$out"
/usr/bin/python3 bench/plot.py "$out" bench/out
exit $failed
