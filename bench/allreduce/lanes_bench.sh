#!/bin/sh
# lanes_bench.sh: what the striped ring's lanes (reduce/README.md "Lanes") cost where nothing is
# lost: pcclAllReduce of 256 MiB float32 (64 or 128 sub-chunks per chunk) and of 9 MiB (a
# 768 x 3072 float32 tensor: 9 sub-chunks of 256 KiB per chunk over 4 peers, 18 over 2, not a
# multiple of the 4 streams) on loopback, 2 and 4 peers, over TCP (PCCL_SHM=0) and as a
# user gets it (same-host shared memory), with a pool of 4 streams per neighbour (each op striped
# over them, one in-order lane per stream) against pool 1 and against pool 4 on one lane
# (PCCL_STRIPE_LANES=0, the ring before session 8), all in the same interleaved rounds
# (LANES_ROUNDS, default 5; odd rounds in reverse order). Per run: the median of 5 ops after one
# warm-up; per case, the median over the rounds. CSV rows: bus bandwidth (2(N-1)/N x bytes / time)
# against each baseline, and CPU seconds and voluntary context switches per op (all peer
# processes, user + system) against pool 4 on one lane. LANES_PEERS (default "2 4"),
# LANES_LINKS (default "tcp shm") and LANES_MIB (default "256 9") narrow the cases. Per run 5 ops
# of 256 MiB, 20 of smaller sizes. Notes on stderr.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
rounds=${LANES_ROUNDS:-5} sizes=${LANES_MIB:-256 9} peers=${LANES_PEERS:-2 4} links=${LANES_LINKS:-tcp shm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print 0}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
cases="p1 p4 p4s" rev="p4s p4 p1"
r=0
while [ $r -lt "$rounds" ]; do
    order=$cases; [ $((r % 2)) = 1 ] && order=$rev
    for mib in $sizes; do
    iters=5; [ "$mib" -lt 64 ] && iters=20
    for n in $peers; do
        for link in $links; do
            for c in $order; do
                shm=""; [ $link = tcp ] && shm=0
                lanes=""; [ $c = p4s ] && lanes=0
                pool=${c#p}; pool=${pool%s}
                line=$(env ${shm:+PCCL_SHM=$shm} ${lanes:+PCCL_STRIPE_LANES=$lanes} timeout 300 "$drv" "$master" "$peer" busbw \
                    --peers $n --sizes $mib --warmup 1 --iters $iters --pool "$pool" 2> "$tmp/err") ||
                    { echo "lanes_bench: n$n $link $c failed: $(tail -1 "$tmp/err")" >&2; continue; }
                # busbw SIZE MEDIAN_US MIN_US CPU_US SLEEPS (CPU_US: of one op, all peers)
                set -- $line
                awk -v us="$3" -v n=$n -v m=$mib 'BEGIN { printf "%.4f\n", 2 * (n - 1) / n * m * 1048576 / us / 1e3 }' >> "$tmp/bw.$mib.n$n.$link.$c"
                awk -v cpu="$5" 'BEGIN { printf "%.4f\n", cpu / 1e6 }' >> "$tmp/cpu.$mib.n$n.$link.$c"
                echo "$6" >> "$tmp/sleeps.$mib.n$n.$link.$c"
                echo "lanes_bench: round $r ${mib}MiB n$n $link $c: $(tail -1 "$tmp/bw.$mib.n$n.$link.$c") GB/s bus, $(tail -1 "$tmp/cpu.$mib.n$n.$link.$c") s CPU/op, $6 sleeps/op (load $(cut -d' ' -f1 /proc/loadavg))" >&2
            done
        done
    done
    done
    r=$((r + 1))
done
for mib in $sizes; do
for n in $peers; do
    for link in $links; do
        f=$tmp/bw.$mib.n$n.$link
        [ -s "$f.p4" ] || continue
        b4=$(median < "$f.p4") b1=$(median < "$f.p1") b4s=$(median < "$f.p4s")
        c4=$(median < "$tmp/cpu.$mib.n$n.$link.p4") c4s=$(median < "$tmp/cpu.$mib.n$n.$link.p4s")
        w4=$(median < "$tmp/sleeps.$mib.n$n.$link.p4") w4s=$(median < "$tmp/sleeps.$mib.n$n.$link.p4s")
        echo "allreduce_lanes/n${n}_${link}_${mib}MiB_pool4_busbw_vs_pool1,$b4,GB/s,$b1,$(ratio "$b4" "$b1")"
        echo "allreduce_lanes/n${n}_${link}_${mib}MiB_pool4_busbw_vs_pool4_one_lane,$b4,GB/s,$b4s,$(ratio "$b4" "$b4s")"
        echo "allreduce_lanes/n${n}_${link}_${mib}MiB_pool4_cpu_per_op_vs_pool4_one_lane,$c4,s,$c4s,$(ratio "$c4" "$c4s")"
        echo "allreduce_lanes/n${n}_${link}_${mib}MiB_pool4_sleeps_per_op_vs_pool4_one_lane,$w4,count,$w4s,$(ratio "$w4" "$w4s")"
    done
done
done
