#!/bin/sh
# The all-reduce benchmarks' driver and peer still speak one line protocol: ar_bench drives a real
# pccl-master and ar_bench_peer processes through one all-reduce, a multi call cut into equal parts
# and one cut as a GPT-2-124M-shaped model (what multi_bench.sh runs), and every result line must
# carry its five figures. (multi_bench.sh printed no row for five sessions when its peer's reply
# lost a field; make bench does not read the rows.) A cut that does not fit the size is refused.
set -u
ws=$TEST_SRCDIR/$TEST_WORKSPACE
drv=$ws/bench/allreduce/ar_bench peer=$ws/bench/allreduce/ar_bench_peer master=$ws/ccoip/master/pccl-master
fails=0
# check NAME ARGS...: one "busbw SIZE MEDIAN_US MIN_US CPU_US SLEEPS" line with a median > 0.
check() {
    name=$1
    shift
    out=$(timeout 120 "$drv" "$master" "$peer" busbw --peers 2 --warmup 1 --iters 2 "$@" 2>&1)
    if echo "$out" | grep -Eq '^busbw [0-9.]+ [1-9][0-9]* [0-9]+ [0-9]+ [0-9]+$'; then
        echo "ok: $name: $out"
    else
        echo "FAIL: $name: $out"
        fails=$((fails + 1))
    fi
}
check "one op" --sizes 1
check "multi, 7 parts" --sizes 3 --parts 7 --inflight 4
check "multi, gpt2 cut" --sizes 474.7001953125 --parts gpt2 --inflight 8
out=$(timeout 120 "$drv" "$master" "$peer" busbw --peers 2 --warmup 1 --iters 1 --sizes 16 --parts gpt2 2>&1)
if echo "$out" | grep -q "bench failed: unknown multi"; then
    echo "ok: a gpt2 cut of 16 MiB is refused"
else
    echo "FAIL: a gpt2 cut of 16 MiB: $out"
    fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] && echo PASS || echo "FAILED: $fails"
exit "$fails"
