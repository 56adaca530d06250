#!/bin/sh
# allreduce_bench.sh: pcclAllReduce bus bandwidth on loopback (2 and 4 peers, float32 Sum, 1 to
# 256 MiB) against torch.distributed gloo and single-stream raw TCP measured in the same run; the
# per-op time of a 1 MiB all-reduce; 4 peers sending by reference against by copy; the failure
# latency (SIGKILL of a peer to every survivor's error return, 20 trials). CSV rows
# name,value,unit,baseline,ratio on stdout, notes on stderr.
# Bus bandwidth = 2(N-1)/N * bytes / time (what every link carries).
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..   # run from the source tree
master=$rf/ccoip/master/pccl-master
peer=$rf/bench/allreduce/ar_bench_peer
drv=$rf/bench/allreduce/ar_bench
tcp=$rf/bench/allreduce/tcp_bench
gloo=$rf/bench/allreduce/gloo_bench.py
tmp=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM

# "MEDIAN" of the numbers on stdin.
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print 0}'; }

# gloo N SIZES ITERS -> lines "gloo SIZE MEDIAN_US MIN_US" (rank 0's)
run_gloo() {
    n=$1 port=$(( 29500 + $$ % 1000 ))
    r=1
    while [ $r -lt "$n" ]; do
        /usr/bin/python3 "$gloo" $r "$n" 127.0.0.1 $port "$2" "$3" > /dev/null 2>"$tmp/gloo$r.err" &
        r=$((r + 1))
    done
    timeout 600 /usr/bin/python3 "$gloo" 0 "$n" 127.0.0.1 $port "$2" "$3" 2>"$tmp/gloo0.err"
    wait
}

busbw() { # N MIB US -> GB/s
    awk -v n="$1" -v m="$2" -v us="$3" 'BEGIN { printf "%.3f", 2*(n-1)/n*m*1048576/(us*1e-6)/1e9 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a/b; else print "nan" }'; }

echo "allreduce: raw TCP on loopback" >&2
tcp_mbs=$(for i in 1 2 3; do "$tcp" loop 1024 | awk '{print $2}'; done | median)
tcp_gbs=$(awk -v v="$tcp_mbs" 'BEGIN { printf "%.3f", v/1000 }')

for n in 2 4; do
    echo "allreduce: $n peers, PCCL and gloo" >&2
    { "$drv" "$master" "$peer" busbw --peers $n --sizes 1 --warmup 20 --iters 200
      "$drv" "$master" "$peer" busbw --peers $n --sizes 16,64,256 --warmup 1 --iters 5; } > "$tmp/pccl$n"
    { run_gloo $n 1 200; run_gloo $n 16,64,256 5; } > "$tmp/gloo$n"
    for mib in 1 16 64 256; do
        p=$(awk -v m=$mib '$1=="busbw" && $2==m {print $3}' "$tmp/pccl$n")
        g=$(awk -v m=$mib '$1=="gloo" && $2==m {print $3}' "$tmp/gloo$n")
        [ -n "$p" ] && [ -n "$g" ] || { echo "allreduce: missing figures for $n peers $mib MiB" >&2; continue; }
        pb=$(busbw $n $mib "$p") gb=$(busbw $n $mib "$g")
        echo "allreduce_lo/n${n}_${mib}MiB_busbw_vs_gloo,$pb,GB/s,$gb,$(ratio "$pb" "$gb")"
        if [ $mib = 1 ]; then
            echo "allreduce_lo/n${n}_1MiB_time_vs_gloo,$p,us,$g,$(ratio "$p" "$g")"
        fi
        if [ $mib = 256 ]; then
            echo "allreduce_lo/n${n}_256MiB_busbw_vs_raw_tcp,$pb,GB/s,$tcp_gbs,$(ratio "$pb" "$tcp_gbs")"
            echo "allreduce_lo/n${n}_256MiB_gloo_busbw_vs_raw_tcp,$gb,GB/s,$tcp_gbs,$(ratio "$gb" "$tcp_gbs")"
        fi
    done
done

# What sending by reference (vmsplice) buys: 4 peers, 256 MiB, PCCL_SEND_SPLICE=1 vs =0, run
# back to back three times each (the loopback figures swing between runs on a shared machine).
echo "allreduce: 4 peers, 256 MiB, sends by reference vs by copy" >&2
for i in 1 2 3; do
    PCCL_SEND_SPLICE=1 "$drv" "$master" "$peer" busbw --peers 4 --sizes 256 --warmup 1 --iters 5 | awk '{print $3}' >> "$tmp/ref"
    PCCL_SEND_SPLICE=0 "$drv" "$master" "$peer" busbw --peers 4 --sizes 256 --warmup 1 --iters 5 | awk '{print $3}' >> "$tmp/copy"
done
ref_us=$(median < "$tmp/ref") copy_us=$(median < "$tmp/copy")
if [ "$ref_us" != 0 ] && [ "$copy_us" != 0 ]; then
    echo "allreduce_lo/n4_256MiB_busbw_splice_vs_copy,$(busbw 4 256 "$ref_us"),GB/s,$(busbw 4 256 "$copy_us"),$(ratio "$copy_us" "$ref_us")"
fi

echo "allreduce: failure latency, 4 peers, 16 MiB, 20 trials" >&2
f=$("$drv" "$master" "$peer" failure --peers 4 --mib 16 --trials 20)
if [ -n "$f" ]; then
    set -- $f
    echo "allreduce_fail/kill_to_error_median,$2,ms,$4,$(ratio "$2" "$4")"
    echo "allreduce_fail/kill_to_error_max,$3,ms,$4,$(ratio "$3" "$4")"
    echo "allreduce: failure latency over $5 trials; baseline = one successful 16 MiB all-reduce" >&2
else
    echo "allreduce: the failure-latency run failed" >&2
    exit 1
fi
