#!/bin/sh
# scale_bench.sh: how the flat ring scales with the number of peers (issue 34, part 1).
#
# One host: N peers on loopback (default pool, links over shared memory as a user gets them):
# admission of all N at once (the first peer alone, then N-1 connect together and one topology
# round admits them), the time of 4 KiB, 1 MiB and 16 MiB float32 all-reduces, the master's CPU
# per op and its peak RSS. Each op time is set against the ring's model with its two constants
# taken from the N = 2 run of the same invocation: model(N, S) = 2(N-1) x (L + S/(2r)), L the
# per-step latency (half the 2-peer 4 KiB op) and r a link's rate when two peers have the two
# cores (from the 2-peer 16 MiB op); with N peers on one host the cores are shared, so a step
# moves S/N bytes at 2r/N and the S/(2r) term does not shrink with N. Admission, master CPU and
# RSS are set against the N = 2 figures of the same run.
#
# Network namespaces: N hosts, each shaped to 100 Mbit/s (tbf, egress and its switch port) with
# 25 ms one-way delay on its ingress (the WAN bench's delay line, nfq_delay): the time of 4 KiB,
# 1 MiB and 64 MiB all-reduces against the model with the path's nominal figures,
# 2(N-1) x (25 ms + (S/N) / 100 Mbit/s), and admission. Needs root (skipped otherwise).
#
# Every N runs SCALE_ROUNDS times (default 2), the list ascending then descending, and each figure
# is the median over the rounds of a run's per-op median. Bounded by default; the big runs by
# environment: SCALE_PEERS (default "2 4 8 16"; SCALE_BIG=1: "2 4 8 16 32 64"), SCALE_HOSTS
# (default "4 8"; SCALE_BIG=1: "4 8 16 32"), SCALE_WAN=0 skips the namespaces. CSV rows on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
NFQ_DELAY=$rf/bench/allreduce/nfq_delay
TCP_BENCH=$rf/bench/allreduce/tcp_bench GLOO_BENCH=$rf/bench/allreduce/gloo_bench.py
. "$rf/bench/allreduce/netns_lib.sh"
tmp=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$tmp"' EXIT INT TERM
big=${SCALE_BIG:-0}
peers_list=${SCALE_PEERS:-$([ "$big" = 1 ] && echo "2 4 8 16 32 64" || echo "2 4 8 16")}
hosts_list=${SCALE_HOSTS:-$([ "$big" = 1 ] && echo "4 8 16 32" || echo "4 8")}
rounds=${SCALE_ROUNDS:-2}
K4=0.00390625 # 4 KiB in MiB

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print 0}'; }
# fig FILE N KEY FIELD: the median over rounds of FIELD of the lines "N KEY ..." in FILE
fig() { awk -v n="$2" -v k="$3" -v f="$4" '$1==n && $2==k {print $f}' "$1" | median; }
# order LIST ROUND: the list, reversed in even rounds
order() { if [ $(($2 % 2)) = 0 ]; then for w in $1; do echo "$w"; done | tac | tr '\n' ' '; else echo "$1"; fi; }

# one OUT N ARGS...: one ar_bench run, its lines prefixed with N into OUT
one() {
    out=$1 n=$2
    shift 2
    AR_BENCH_WATCHDOG_S=${AR_BENCH_WATCHDOG_S:-1500} "$drv" "$master" "$peer" busbw --peers "$n" --admit-all "$@" \
        2>>"$tmp/err" | awk -v n="$n" '{print n, $0}' >> "$out" || echo "scale_bench: $n peers: a run failed" >&2
}

echo "scale_bench: load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $(nproc) cores" >&2

# ---- one host -----------------------------------------------------------------------------
: > "$tmp/lo"
r=1
while [ $r -le "$rounds" ]; do
    for n in $(order "$peers_list" $r); do
        echo "scale_bench: one host, $n peers, round $r/$rounds" >&2
        one "$tmp/lo" "$n" --sizes "$K4,1,16" --warmup 3 --iters 9
    done
    r=$((r + 1))
done
t4=$(awk '$1==2 && $2=="busbw" && $3=="0.00390625" {print $4}' "$tmp/lo" | median)
t16=$(awk '$1==2 && $2=="busbw" && $3=="16" {print $4}' "$tmp/lo" | median)
a2=$(fig "$tmp/lo" 2 admit 3) c2=$(fig "$tmp/lo" 2 master 3) h2=$(fig "$tmp/lo" 2 master 4)
if [ "$t4" = 0 ] || [ "$t16" = 0 ]; then
    echo "scale_bench: no 2-peer figures: no model for one host" >&2
else
    # L = t4/2 (us); S/(2r) at 16 MiB = t16/2 - L; so S/(2r) = (t16/2 - L) * S/16MiB
    L=$(awk -v t="$t4" 'BEGIN {print t/2}')
    B=$(awk -v t="$t16" -v l="$L" 'BEGIN {b = (t/2 - l) / 16; if (b < 0) b = 0; print b}') # us per MiB
    echo "scale_bench: one-host model: L = $L us per step, S/(2r) = $B us per MiB (from the 2-peer run)" >&2
    for n in $peers_list; do
        for s in $K4 1 16; do
            t=$(awk -v n="$n" -v s="$s" '$1==n && $2=="busbw" && $3==s {print $4}' "$tmp/lo" | median)
            [ "$t" != 0 ] || continue
            name=$([ "$s" = $K4 ] && echo 4KiB || echo "${s}MiB")
            awk -v n="$n" -v s="$s" -v t="$t" -v l="$L" -v b="$B" -v nm="$name" 'BEGIN {
                m = 2*(n-1)*(l + b*s)
                printf "scale_lo/n%d_%s_ms_vs_ring_model,%.3f,ms,%.3f,%.3f\n", n, nm, t/1e3, m/1e3, t/m
                if (s == 16) printf "scale_lo/n%d_16MiB_busbw_vs_ring_model,%.3f,GB/s,%.3f,%.3f\n", n,
                    2*(n-1)/n*s*1048576/(t*1e-6)/1e9, 2*(n-1)/n*s*1048576/(m*1e-6)/1e9, m/t }'
        done
        a=$(fig "$tmp/lo" "$n" admit 3) c=$(fig "$tmp/lo" "$n" master 3) h=$(fig "$tmp/lo" "$n" master 4)
        awk -v n="$n" -v a="$a" -v a2="$a2" -v c="$c" -v c2="$c2" -v h="$h" -v h2="$h2" 'BEGIN {
            if (a > 0 && a2 > 0) printf "scale_lo/n%d_admit_all_s_vs_n2,%.3f,s,%.3f,%.3f\n", n, a, a2, a/a2
            if (c2 > 0) printf "scale_lo/n%d_master_cpu_ms_per_op_vs_n2,%.3f,ms,%.3f,%.3f\n", n, c, c2, c/c2
            if (h > 0 && h2 > 0) printf "scale_lo/n%d_master_peak_rss_vs_n2,%.2f,MiB,%.2f,%.3f\n", n, h/1024, h2/1024, h/h2 }'
    done
fi

# ---- network namespaces: 100 Mbit/s, 25 ms one way ----------------------------------------
if [ "${SCALE_WAN:-1}" = 0 ]; then
    echo "scale_bench: wan: SKIPPED (SCALE_WAN=0)" >&2
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "scale_bench: wan: SKIPPED: needs root (network namespaces)" >&2
    exit 0
fi
: > "$tmp/wan"
r=1
while [ $r -le "$rounds" ]; do
    for n in $(order "$hosts_list" $r); do
        echo "scale_bench: wan, $n hosts, round $r/$rounds" >&2
        NS_PREFIX=sc$$r$n
        if ns_setup "$n" 100 && ns_impair 25 0; then
            one "$tmp/wan" "$n" --netns "$(ns_list "$n")" --ip 10.77.0. --sizes "$K4,1" --warmup 2 --iters 5
            one "$tmp/wan" "$n" --netns "$(ns_list "$n")" --ip 10.77.0. --sizes 64 --warmup 1 --iters 2
        else
            echo "scale_bench: wan: cannot create $n shaped hosts" >&2
        fi
        ns_cleanup
    done
    r=$((r + 1))
done
for n in $hosts_list; do
    for s in $K4 1 64; do
        t=$(awk -v n="$n" -v s="$s" '$1==n && $2=="busbw" && $3==s {print $4}' "$tmp/wan" | median)
        [ "$t" != 0 ] || continue
        name=$([ "$s" = $K4 ] && echo 4KiB || echo "${s}MiB")
        awk -v n="$n" -v s="$s" -v t="$t" -v nm="$name" 'BEGIN {
            m = 2*(n-1)*(25e3 + s*1048576/n/(100e6/8)*1e6)
            printf "scale_wan/n%d_%s_s_vs_ring_model,%.3f,s,%.3f,%.3f\n", n, nm, t/1e6, m/1e6, t/m }'
    done
    a=$(awk -v n="$n" '$1==n && $2=="admit" {print $3}' "$tmp/wan" | median)
    [ "$a" != 0 ] && awk -v n="$n" -v a="$a" 'BEGIN {
        printf "scale_wan/n%d_admit_all_s_vs_rtt,%.3f,s,0.050,%.1f\n", n, a, a/0.05 }'
done
[ -s "$tmp/err" ] && grep -v "^$" "$tmp/err" | sort | uniq -c | head -5 >&2
echo "scale_bench: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end" >&2
exit 0
