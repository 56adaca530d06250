#!/bin/sh
# multi_bench.sh (issue 18): pcclAllReduceMultipleWithRetry over a GPT-2-124M-shaped model (148
# float32 tensors, 474.7 MiB; ar_bench_peer's "gpt2" cut) against one pcclAllReduce of the same bytes, same
# run, interleaved rounds (MULTI_ROUNDS, default 3; the row is the median of the rounds' medians):
#   - loopback, 2 peers;
#   - 2 hosts in network namespaces at 1 Gbit/s (tbf, netns_lib.sh; needs root, else skipped);
#   - 2 hosts at 500 Mbit/s with 100 Mbit/s per TCP flow (ns_flowcap), where an op's speed is
#     the number of streams it keeps busy: every stream of the pool must carry its share.
# Bus bandwidth = 2(N-1)/N x bytes / time. MULTI_POOL: the pool size (default 4), MULTI_INFLIGHT:
# max_in_flight (default 8). CSV rows on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
TCP_BENCH=$rf/bench/allreduce/tcp_bench
. "$rf/bench/allreduce/netns_lib.sh"
tmp=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$tmp"' EXIT INT TERM
mib=474.7001953125 rounds=${MULTI_ROUNDS:-3} pool=${MULTI_POOL:-4} inflight=${MULTI_INFLIGHT:-8}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
bus() { awk -v n="$1" -v m=$mib -v us="$2" 'BEGIN { printf "%.2f", 2*(n-1)/n*m*1048576/(us*1e-6)/1e6 }'; }

# run NAME PEERS ITERS [ar_bench options]: interleaved rounds of one big op and the model's multi.
run() {
    name=$1 n=$2 iters=$3
    shift 3
    : > "$tmp/big" ; : > "$tmp/multi"
    r=0
    while [ $r -lt "$rounds" ]; do
        "$drv" "$master" "$peer" busbw --peers "$n" --sizes $mib --pool "$pool" --warmup 1 --iters "$iters" "$@" |
            awk '$1=="busbw" {print $3}' >> "$tmp/big"
        "$drv" "$master" "$peer" busbw --peers "$n" --sizes $mib --pool "$pool" --warmup 1 --iters "$iters" \
            --parts gpt2 --inflight "$inflight" "$@" | awk '$1=="busbw" {print $3}' >> "$tmp/multi"
        r=$((r + 1))
    done
    b=$(median < "$tmp/big") m=$(median < "$tmp/multi")
    if [ -z "$b" ] || [ -z "$m" ]; then
        echo "multi_bench: $name: a run failed" >&2
        failed=1 # make bench names this benchmark as failed
        return
    fi
    echo "multi_bench: $name: one op $(tr '\n' ' ' < "$tmp/big")us, multi $(tr '\n' ' ' < "$tmp/multi")us" >&2
    bb=$(bus "$n" "$b") mb=$(bus "$n" "$m")
    echo "allreduce_multi/${name}_gpt2_148_tensors_pool${pool}_busbw_vs_one_op,$mb,MB/s,$bb,$(awk -v a="$mb" -v b="$bb" 'BEGIN { printf "%.3f", a/b }')"
}

failed=0
run lo_n2 2 5
if [ "$(id -u)" = 0 ] && ns_setup 2 1000; then
    run tbf1000_n2 2 2 --netns "$(ns_list 2)" --ip 10.77.0.
    ns_cleanup
    if ns_setup 2 500 && ns_flowcap 100 2>/dev/null; then
        run flowcap100_n2 2 2 --netns "$(ns_list 2)" --ip 10.77.0.
    else
        echo "multi_bench: SKIPPED the per-flow capped run: ns_flowcap failed" >&2
    fi
    ns_cleanup
else
    ns_cleanup
    echo "multi_bench: SKIPPED the shaped runs: cannot create network namespaces (needs root)" >&2
fi
exit $failed
