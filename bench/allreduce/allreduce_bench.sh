#!/bin/sh
# allreduce_bench.sh: pcclAllReduce on loopback (2 and 4 peers, float32 Sum, 1 to 256 MiB)
# against torch.distributed gloo, a raw TCP ring and a minimal ring all-reduce without the library
# (tcp_bench allreduce: the headroom) measured in the same run, in interleaved
# rounds: bus bandwidth against gloo's and against the raw ring's per-stream goodput (N processes
# each sending to the next while receiving from the previous: the two-way limit for 2 peers);
# CPU seconds per GB reduced (user + system time of every peer process, all threads, getrusage)
# against gloo's and the raw ring's for the same link bytes; the per-op time of a 1 MiB
# all-reduce; 4 peers sending by reference against by copy; the failure latency (SIGKILL of a
# peer to every survivor's error return, 20 trials). PCCL runs twice per round: as a user gets it
# (same-host links over shared memory where the platform has it) and with PCCL_SHM=0 (TCP: rows
# with "_tcp_"), against each other too; a one-thread memcpy of cold buffers is the shared-memory
# path's own baseline. CSV rows name,value,unit,baseline,ratio on
# stdout, notes on stderr. Bus bandwidth = 2(N-1)/N * bytes / time (what every link carries).
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..   # run from the source tree
master=$rf/ccoip/master/pccl-master
peer=$rf/bench/allreduce/ar_bench_peer
drv=$rf/bench/allreduce/ar_bench
tcp=$rf/bench/allreduce/tcp_bench
gloo=$rf/bench/allreduce/gloo_bench.py
# The Python that has torch (Debian's; PCCL_BENCH_PYTHON elsewhere, e.g. a lent GPU host).
py=${PCCL_BENCH_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM

# "MEDIAN" of the numbers on stdin.
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print 0}'; }

# gloo N SIZES ITERS [WARMUP] -> lines "gloo SIZE MEDIAN_US MIN_US CPU_US" of every rank
run_gloo() {
    n=$1 w=${4:-1} port=$(( 29500 + $$ % 1000 ))
    r=1
    while [ $r -lt "$n" ]; do
        "$py" "$gloo" $r "$n" 127.0.0.1 $port "$2" "$3" "$w" > "$tmp/gloo$r.out" 2>"$tmp/gloo$r.err" &
        r=$((r + 1))
    done
    timeout 600 "$py" "$gloo" 0 "$n" 127.0.0.1 $port "$2" "$3" "$w" 2>"$tmp/gloo0.err"
    wait
    r=1
    while [ $r -lt "$n" ]; do cat "$tmp/gloo$r.out"; r=$((r + 1)); done
}

busbw() { # N MIB US -> GB/s
    awk -v n="$1" -v m="$2" -v us="$3" 'BEGIN { printf "%.3f", 2*(n-1)/n*m*1048576/(us*1e-6)/1e9 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a/b; else print "nan" }'; }
cpu_gb() { # MIB CPU_US -> CPU seconds per GB reduced
    awk -v m="$1" -v c="$2" 'BEGIN { printf "%.4f", c*1e-6/(m*1048576/1e9) }'
}

# Rounds interleave every contender (raw TCP ring, PCCL, gloo; 2 then 4 peers), so that load from
# other work on the machine falls on all of them alike; each figure is the median over the rounds
# of a round's per-op median. AR_BENCH_ROUNDS (default 3), AR_BENCH_SIZES (MiB, default 1 to 256).
rounds=${AR_BENCH_ROUNDS:-3}
sizes=${AR_BENCH_SIZES:-1,4,16,64,256}
big=$(echo "$sizes" | tr ',' '\n' | awk '$1 > 1' | paste -sd, -)
# The 1 MiB op is short: more of them per round.
has1=$(echo "$sizes" | tr ',' '\n' | awk '$1 == 1 {print "y"}')

run_ring() { # N: n processes in a ring, each stream running while every other one does
    mib=$([ "$1" = 2 ] && echo 1024 || echo 512)
    "$tcp" ring "$1" $mib | awk -v m=$mib '{print $2, $3, m}' >> "$tmp/ring$1"
    # The same from and into 256 MiB buffers, mostly out of cache like an all-reduce's.
    TCP_BENCH_SPAN_MIB=256 "$tcp" ring "$1" $mib | awk -v m=$mib '{print $2, $3, m}' >> "$tmp/ringcold$1"
}
# The headroom: tcp_bench's minimal ring all-reduce (no library; one poll() thread, or a send
# thread and a receive+reduce thread) of each size > 1 MiB, in frames of AR_BENCH_MINIMAL_KIB
# (default 1024; a comma list tries several).
frames_kib=${AR_BENCH_MINIMAL_KIB:-1024}
run_minimal() { # N -> lines "minimal THREADS FRAME_KIB MIB TIME_US BUSBW CPU_US"
    for kib in $(echo "$frames_kib" | tr ',' ' '); do
        for mib in $(echo "$big" | tr ',' ' '); do
            for t in 1 2; do
                TCP_BENCH_FRAME_KIB=$kib "$tcp" allreduce "$1" "$mib" $t |
                    awk -v t=$t -v k=$kib '$1 == "allreduce" {print "minimal", t, k, $2, $3, $4, $5}' >> "$tmp/minimal$1" ||
                    echo "allreduce: tcp_bench allreduce $1 $mib $t failed" >&2
            done
        done
    done
}
# Untimed ops before each size > 1 MiB is timed, for every contender (AR_BENCH_WARMUP, default 3):
# the first ops after a size change run slower (socket buffers grow, ring pages fault in), 1.2 to
# 2.3 x at 4 MiB with 4 peers after one warm-up op on the 2-core machine.
warm=${AR_BENCH_WARMUP:-3}
# AR_BENCH_POOL: PCCL's connection pool (default 0: the library's default, 4, what a user gets;
# runs before session 6 used 1).
pool=${AR_BENCH_POOL:-0}
run_pccl() { # N
    { [ "$has1" ] && "$drv" "$master" "$peer" busbw --peers "$1" --sizes 1 --warmup 20 --iters 50 --pool "$pool"
      [ -n "$big" ] && "$drv" "$master" "$peer" busbw --peers "$1" --sizes "$big" --warmup "$warm" --iters 5 --pool "$pool"; } >> "$tmp/pccl$1"
}
run_pccl_tcp() { # N: the same with every link on TCP
    { [ "$has1" ] && PCCL_SHM=0 "$drv" "$master" "$peer" busbw --peers "$1" --sizes 1 --warmup 20 --iters 50 --pool "$pool"
      [ -n "$big" ] && PCCL_SHM=0 "$drv" "$master" "$peer" busbw --peers "$1" --sizes "$big" --warmup "$warm" --iters 5 --pool "$pool"; } >> "$tmp/pcclt$1"
}
# AR_BENCH_COMBINE_AB=1: PCCL a third time per round with PCCL_SHM_COMBINE=0 (links over shared
# memory stage each reduce-scatter frame and the ring combines it, as before session 9): rows
# "_combine_vs_copy" (the default, combining straight out of the pipe, against that) and
# "_copy_cpu_s_per_GB_vs_gloo".
run_pccl_copy() { # N
    { [ "$has1" ] && PCCL_SHM_COMBINE=0 "$drv" "$master" "$peer" busbw --peers "$1" --sizes 1 --warmup 20 --iters 50 --pool "$pool"
      [ -n "$big" ] && PCCL_SHM_COMBINE=0 "$drv" "$master" "$peer" busbw --peers "$1" --sizes "$big" --warmup "$warm" --iters 5 --pool "$pool"; } >> "$tmp/pcclc$1"
}
run_memcpy() { # N (unused): one thread, 256 MiB cold buffers
    "$tcp" memcpy 256 | awk '$1 == "memcpy" {print $2}' >> "$tmp/memcpy"
}
run_gloo_all() { # N: the slowest rank's time, the ranks' CPU summed
    { [ "$has1" ] && run_gloo "$1" 1 50 20
      [ -n "$big" ] && run_gloo "$1" "$big" 5 "$warm"; } |
        awk '$1 == "gloo" { if (!($2 in t) || $3 > t[$2]) t[$2] = $3; c[$2] += $5 }
             END { for (m in t) print "gloo", m, t[m], c[m] }' >> "$tmp/gloo$1"
}

# Odd rounds run ring, PCCL, gloo; even rounds the other way round (what runs first in a round
# was measured to fare differently on this machine). AR_BENCH_CONTENDERS: a subset, in this
# order (e.g. "pccl pccl_copy gloo_all" for a quick A/B; rows whose contender is missing say so).
contenders=${AR_BENCH_CONTENDERS:-ring minimal pccl pccl_tcp gloo_all memcpy}
if [ "${AR_BENCH_COMBINE_AB:-0}" = 1 ] && ! echo " $contenders " | grep -q " pccl_copy "; then
    contenders=$(echo " $contenders " | sed 's/ pccl / pccl pccl_copy /; s/^ //; s/ $//')
fi
reverse() { for w in $1; do r="$w${r:+ $r}"; done; echo "$r"; r=; }
round=1
while [ "$round" -le "$rounds" ]; do
    order=$contenders
    [ $((round % 2)) = 0 ] && order=$(reverse "$contenders")
    for n in 2 4; do
        echo "allreduce: round $round/$rounds, $n peers: $order" >&2
        for who in $order; do "run_$who" $n; done
    done
    round=$((round + 1))
done

touch "$tmp/memcpy" "$tmp/ring2" "$tmp/ring4" "$tmp/ringcold2" "$tmp/ringcold4"
memcpy_gbs=$(median < "$tmp/memcpy")
echo "allreduce: memcpy of cold 256 MiB buffers, one thread: ${memcpy_gbs} GB/s" >&2
for n in 2 4; do
    ring_mbs=$(awk '{print $1}' "$tmp/ring$n" | median)
    ring_gbs=$(awk -v v="$ring_mbs" 'BEGIN { printf "%.3f", v/1000 }')
    # Raw TCP's CPU for the bytes an all-reduce moves: N streams of 2(N-1)/N x the op's bytes.
    ring_cpu_gb=$(awk -v n=$n '{print $2*1e-6/(n*$3*1048576/1e9)*2*(n-1)}' "$tmp/ring$n" | median |
        awk '{printf "%.4f", $1}')
    echo "allreduce: $n peers, raw TCP ring ${ring_gbs} GB/s per stream, ${ring_cpu_gb} CPU s per GB reduced" >&2
    cold_gbs=$(awk '{print $1}' "$tmp/ringcold$n" | median | awk '{printf "%.3f", $1/1000}')
    cold_cpu_gb=$(awk -v n=$n '{print $2*1e-6/(n*$3*1048576/1e9)*2*(n-1)}' "$tmp/ringcold$n" | median |
        awk '{printf "%.4f", $1}')
    echo "allreduce_lo/n${n}_tcp_ring_cold_vs_hot,$cold_gbs,GB/s,$ring_gbs,$(ratio "$cold_gbs" "$ring_gbs")"
    echo "allreduce_cpu/n${n}_tcp_ring_cold_s_per_GB_vs_hot,$cold_cpu_gb,s/GB,$ring_cpu_gb,$(ratio "$cold_cpu_gb" "$ring_cpu_gb")"
    for mib in $(echo "$sizes" | tr ',' ' '); do
        p=$(awk -v m=$mib '$1=="busbw" && $2==m {print $3}' "$tmp/pccl$n" | median)
        pc=$(awk -v m=$mib '$1=="busbw" && $2==m {print $5}' "$tmp/pccl$n" | median)
        g=$(awk -v m=$mib '$1=="gloo" && $2==m {print $3}' "$tmp/gloo$n" | median)
        gc=$(awk -v m=$mib '$1=="gloo" && $2==m {print $4}' "$tmp/gloo$n" | median)
        [ "$p" != 0 ] && [ "$g" != 0 ] || { echo "allreduce: missing figures for $n peers $mib MiB" >&2; continue; }
        pb=$(busbw $n $mib "$p") gb=$(busbw $n $mib "$g")
        echo "allreduce_lo/n${n}_${mib}MiB_busbw_vs_gloo,$pb,GB/s,$gb,$(ratio "$pb" "$gb")"
        echo "allreduce_lo/n${n}_${mib}MiB_busbw_vs_tcp_ring,$pb,GB/s,$ring_gbs,$(ratio "$pb" "$ring_gbs")"
        if [ $mib = 1 ]; then
            echo "allreduce_lo/n${n}_1MiB_time_vs_gloo,$p,us,$g,$(ratio "$p" "$g")"
        fi
        if [ $mib = 256 ]; then
            echo "allreduce_lo/n${n}_256MiB_gloo_busbw_vs_tcp_ring,$gb,GB/s,$ring_gbs,$(ratio "$gb" "$ring_gbs")"
        fi
        # The minimal ring (tcp_bench allreduce): against both limits, gloo, and PCCL against it.
        best=0
        for kib in $(echo "$frames_kib" | tr ',' ' '); do
            for t in 1 2; do
                mu=$(awk -v m=$mib -v t=$t -v k=$kib '$1=="minimal" && $2==t && $3==k && $4==m {print $5}' "$tmp/minimal$n" 2>/dev/null | median)
                mc=$(awk -v m=$mib -v t=$t -v k=$kib '$1=="minimal" && $2==t && $3==k && $4==m {print $7}' "$tmp/minimal$n" 2>/dev/null | median)
                [ "$mu" != 0 ] || continue
                tag=minimal_ring_t$t; [ "$kib" = 1024 ] || tag=${tag}_f${kib}K
                mb=$(busbw $n $mib "$mu") mcg=$(cpu_gb $mib "$mc")
                awk -v a="$mb" -v b="$best" 'BEGIN { exit !(a > b) }' && best=$mb
                echo "allreduce_lo/n${n}_${mib}MiB_${tag}_vs_tcp_ring,$mb,GB/s,$ring_gbs,$(ratio "$mb" "$ring_gbs")"
                echo "allreduce_lo/n${n}_${mib}MiB_${tag}_vs_tcp_ring_cold,$mb,GB/s,$cold_gbs,$(ratio "$mb" "$cold_gbs")"
                echo "allreduce_lo/n${n}_${mib}MiB_${tag}_vs_gloo,$mb,GB/s,$gb,$(ratio "$mb" "$gb")"
                echo "allreduce_cpu/n${n}_${mib}MiB_${tag}_s_per_GB_vs_gloo,$mcg,s/GB,$(cpu_gb $mib "$gc"),$(ratio "$mcg" "$(cpu_gb $mib "$gc")")"
                echo "allreduce_cpu/n${n}_${mib}MiB_${tag}_s_per_GB_vs_pccl,$mcg,s/GB,$(cpu_gb $mib "$pc"),$(ratio "$mcg" "$(cpu_gb $mib "$pc")")"
            done
        done
        [ "$best" != 0 ] && echo "allreduce_lo/n${n}_${mib}MiB_busbw_vs_minimal_ring,$pb,GB/s,$best,$(ratio "$pb" "$best")"
        pcg=$(cpu_gb $mib "$pc") gcg=$(cpu_gb $mib "$gc")
        echo "allreduce_cpu/n${n}_${mib}MiB_cpu_s_per_GB_vs_gloo,$pcg,s/GB,$gcg,$(ratio "$pcg" "$gcg")"
        echo "allreduce_lo/n${n}_${mib}MiB_busbw_vs_memcpy,$pb,GB/s,$memcpy_gbs,$(ratio "$pb" "$memcpy_gbs")"
        # PCCL_SHM=0: every link on TCP, in the same rounds.
        t=$(awk -v m=$mib '$1=="busbw" && $2==m {print $3}' "$tmp/pcclt$n" 2>/dev/null | median)
        tc=$(awk -v m=$mib '$1=="busbw" && $2==m {print $5}' "$tmp/pcclt$n" 2>/dev/null | median)
        if [ "$t" != 0 ]; then
            tb=$(busbw $n $mib "$t") tcg=$(cpu_gb $mib "$tc")
            echo "allreduce_lo/n${n}_${mib}MiB_tcp_busbw_vs_gloo,$tb,GB/s,$gb,$(ratio "$tb" "$gb")"
            echo "allreduce_lo/n${n}_${mib}MiB_tcp_busbw_vs_tcp_ring,$tb,GB/s,$ring_gbs,$(ratio "$tb" "$ring_gbs")"
            echo "allreduce_cpu/n${n}_${mib}MiB_tcp_cpu_s_per_GB_vs_gloo,$tcg,s/GB,$gcg,$(ratio "$tcg" "$gcg")"
            echo "allreduce_lo/n${n}_${mib}MiB_busbw_shm_vs_tcp,$pb,GB/s,$tb,$(ratio "$pb" "$tb")"
            echo "allreduce_cpu/n${n}_${mib}MiB_cpu_s_per_GB_shm_vs_tcp,$pcg,s/GB,$tcg,$(ratio "$pcg" "$tcg")"
        fi
        # PCCL_SHM_COMBINE=0 (AR_BENCH_COMBINE_AB=1): staged and combined by the ring, same rounds.
        cu=$(awk -v m=$mib '$1=="busbw" && $2==m {print $3}' "$tmp/pcclc$n" 2>/dev/null | median)
        cc=$(awk -v m=$mib '$1=="busbw" && $2==m {print $5}' "$tmp/pcclc$n" 2>/dev/null | median)
        if [ "$cu" != 0 ]; then
            cb=$(busbw $n $mib "$cu") ccg=$(cpu_gb $mib "$cc")
            echo "allreduce_lo/n${n}_${mib}MiB_busbw_combine_vs_copy,$pb,GB/s,$cb,$(ratio "$pb" "$cb")"
            echo "allreduce_cpu/n${n}_${mib}MiB_cpu_s_per_GB_combine_vs_copy,$pcg,s/GB,$ccg,$(ratio "$pcg" "$ccg")"
            echo "allreduce_cpu/n${n}_${mib}MiB_copy_cpu_s_per_GB_vs_gloo,$ccg,s/GB,$gcg,$(ratio "$ccg" "$gcg")"
        fi
        if [ $mib = 256 ]; then
            echo "allreduce_cpu/n${n}_256MiB_cpu_s_per_GB_vs_tcp_ring,$pcg,s/GB,$ring_cpu_gb,$(ratio "$pcg" "$ring_cpu_gb")"
            echo "allreduce_cpu/n${n}_256MiB_gloo_cpu_s_per_GB_vs_tcp_ring,$gcg,s/GB,$ring_cpu_gb,$(ratio "$gcg" "$ring_cpu_gb")"
        fi
    done
done

# AR_BENCH_BUSBW_ONLY=1: stop here (for quick comparisons).
[ "${AR_BENCH_BUSBW_ONLY:-0}" = 1 ] && exit 0

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
