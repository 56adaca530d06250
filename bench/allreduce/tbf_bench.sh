#!/bin/sh
# tbf_bench.sh: pcclAllReduce among 4 hosts in network namespaces, each shaped to 500 Mbit/s with
# tbf (egress and ingress), float32 Sum 1 to 256 MiB; baselines measured in the same run: raw
# single-stream TCP goodput between two of the hosts, and torch.distributed gloo on the same
# hosts. Needs root (ip netns); prints a skip line otherwise. CSV rows on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
TCP_BENCH=$rf/bench/allreduce/tcp_bench GLOO_BENCH=$rf/bench/allreduce/gloo_bench.py
. "$rf/bench/allreduce/netns_lib.sh"
trap 'ns_cleanup' EXIT INT TERM
if [ "$(id -u)" != 0 ] || ! ns_setup 4 500; then
    ns_cleanup
    echo "tbf_bench: SKIPPED: cannot create network namespaces (needs root and iproute2)" >&2
    exit 0
fi
sizes=${TBF_SIZES:-1,16,64,256}
tmp=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$tmp"' EXIT INT TERM
n=4
tcp=$(ns_tcp 0 1 128)
echo "tbf_bench: raw TCP h0 -> h1 at 500 Mbit/s: $tcp MB/s" >&2
"$drv" "$master" "$peer" busbw --peers $n --netns "$(ns_list $n)" --ip 10.77.0. --sizes "$sizes" --warmup 1 --iters 3 > "$tmp/pccl" || echo "tbf_bench: PCCL run failed" >&2
ns_gloo $n "$sizes" 3 > "$tmp/gloo" || echo "tbf_bench: gloo run failed" >&2
for mib in $(echo "$sizes" | tr , ' '); do
    p=$(awk -v m="$mib" '$1=="busbw" && $2==m {print $3}' "$tmp/pccl")
    g=$(awk -v m="$mib" '$1=="gloo" && $2==m {print $3}' "$tmp/gloo")
    for pair in "pccl:$p" "gloo:$g"; do
        who=${pair%%:*} us=${pair#*:}
        [ -n "$us" ] || continue
        awk -v who="$who" -v n=$n -v m="$mib" -v us="$us" -v tcp="$tcp" 'BEGIN {
            bw = 2*(n-1)/n*m*1048576/(us*1e-6)/1e6
            printf "allreduce_tbf500/n%d_%gMiB_%s_busbw_vs_raw_tcp,%.2f,MB/s,%.2f,%.3f\n", n, m, who, bw, tcp, bw/tcp }'
    done
done
