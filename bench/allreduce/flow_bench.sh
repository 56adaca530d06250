#!/bin/sh
# flow_bench.sh (issue 18): the WAN cases where each TCP flow is limited on its own, so that a
# connection pool pays. Hosts in network namespaces (netns_lib.sh), one all-reduce striped over
# the pool (pcclAllReduce, float32 Sum), pool 1 / 2 / 4 / 8, against raw TCP with 1 and with N
# parallel streams between two of the hosts (same run):
#   - flowcap: 4 hosts, 500 Mbit/s link, 100 Mbit/s per flow (htb + u32 hash, ns_flowcap), 25 ms
#     one-way delay; FLOW_CAP_MIB (default 64) per op; goal pool N >= 0.9 x min(N x cap, link);
#   - linkonly: the same without the per-flow caps (BBR); goal pool N >= 0.95 x pool 1;
#   - cubic: 2 hosts, 500 Mbit/s, cubic instead of BBR, 25 ms one-way and 0.1% loss
#     (FLOW_LOSS_MIB, default 16), then 50 ms and 1% (FLOW_LOSS1_MIB, default 4); pools 1/4/8.
# Bus bandwidth = 2(N-1)/N x bytes / time (median of the op times). Needs root; prints a skip
# line otherwise. CSV rows on stdout. FLOW_CASES picks cases (default "flowcap linkonly cubic").
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
TCP_BENCH=$rf/bench/allreduce/tcp_bench NFQ_DELAY=$rf/bench/allreduce/nfq_delay
. "$rf/bench/allreduce/netns_lib.sh"
tmp=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$tmp"' EXIT INT TERM
bus() { awk -v n="$1" -v m="$2" -v us="$3" 'BEGIN { printf "%.2f", 2*(n-1)/n*m*1048576/(us*1e-6)/1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a/b; else print "nan" }'; }
if [ "$(id -u)" != 0 ]; then
    echo "flow_bench: SKIPPED: needs root for network namespaces" >&2
    exit 0
fi

# pools NAME HOSTS MIB WARMUP ITERS POOLS...: one op per pool size; rows against raw TCP with 1
# stream ($tcp1) and with as many streams as the pool ($tcpN from tcp_of), and against pool 1.
pools() {
    name=$1 n=$2 mib=$3 warm=$4 iters=$5
    shift 5
    p1=""
    for pool in "$@"; do
        "$drv" "$master" "$peer" busbw --peers "$n" --netns "$(ns_list "$n")" --ip 10.77.0. --sizes "$mib" \
            --pool "$pool" --warmup "$warm" --iters "$iters" > "$tmp/p" || { echo "flow_bench: $name pool $pool failed" >&2; continue; }
        us=$(awk '$1=="busbw" {print $3}' "$tmp/p")
        [ -n "$us" ] || continue
        b=$(bus "$n" "$mib" "$us")
        [ "$pool" = 1 ] && p1=$b
        base=$(awk -v k="$pool" '$1==k {print $2}' "$tmp/tcp_$name")
        echo "flow_bench: $name pool $pool: $b MB/s (raw TCP x$pool: $base)" >&2
        echo "allreduce_flow/${name}_n${n}_${mib}MiB_pool${pool}_busbw_vs_raw_tcp_${pool}_streams,$b,MB/s,$base,$(ratio "$b" "$base")"
        [ -n "$p1" ] && [ "$pool" != 1 ] &&
            echo "allreduce_flow/${name}_n${n}_${mib}MiB_pool${pool}_busbw_vs_pool1,$b,MB/s,$p1,$(ratio "$b" "$p1")"
    done
}

# tcp_of NAME MIB POOLS...: raw TCP h0 -> h1 with k parallel streams for each k (MIB over all).
tcp_of() {
    name=$1 mib=$2
    shift 2
    : > "$tmp/tcp_$name"
    for k in "$@"; do
        per=$(( (mib + k - 1) / k ))
        echo "$k $(ns_tcp_n 0 1 $per "$k")" >> "$tmp/tcp_$name"
    done
    echo "flow_bench: $name raw TCP (streams MB/s): $(tr '\n' ' ' < "$tmp/tcp_$name")" >&2
    one=$(awk '$1==1 {print $2}' "$tmp/tcp_$name")
    for k in "$@"; do
        [ "$k" = 1 ] && continue
        v=$(awk -v k="$k" '$1==k {print $2}' "$tmp/tcp_$name")
        echo "allreduce_flow/${name}_raw_tcp_${k}_streams_vs_1_stream,$v,MB/s,$one,$(ratio "$v" "$one")"
    done
}

cases=${FLOW_CASES:-flowcap linkonly cubic}
for c in $cases; do
    case $c in
    flowcap|linkonly)
        mib=${FLOW_CAP_MIB:-64}
        if ! ns_setup 4 500 || { [ $c = flowcap ] && ! ns_flowcap 100; } || ! ns_impair 25 0; then
            echo "flow_bench: SKIPPED $c: cannot shape the namespaces" >&2
            ns_cleanup
            continue
        fi
        tcp_of $c 64 1 2 4 8
        pools $c 4 "$mib" 1 2 1 2 4 8
        ns_cleanup ;;
    cubic)
        for prof in "25 0.001 ${FLOW_LOSS_MIB:-16}" "50 0.01 ${FLOW_LOSS1_MIB:-4}"; do
            set -- $prof
            d=$1 loss=$2 mib=$3 name=cubic_${1}ms_loss$2
            if ! ns_setup 2 500 || ! ns_cc cubic || ! ns_impair "$d" "$loss"; then
                echo "flow_bench: SKIPPED $name: cannot shape the namespaces" >&2
                ns_cleanup
                continue
            fi
            tcp_of $name "$mib" 1 4 8
            pools $name 2 "$mib" 0 3 1 4 8
            ns_cleanup
        done ;;
    esac
done
