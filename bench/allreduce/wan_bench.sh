#!/bin/sh
# wan_bench.sh (issue 6): 4 hosts in network namespaces, 500 Mbit/s each (tbf), 25 ms one-way
# delay and 0.1% random loss per wire packet on every host's ingress (NFQUEUE + nfq_delay).
#   - a 256 MiB float32 all-reduce cut into 16 all-reduces run by pcclAllReduceMultipleWithRetry
#     over a connection pool of 1, 2, 4 and 8 streams per neighbour (each 16 MiB op striped over
#     the pool, docs/allreduce.md), against raw single-stream TCP goodput and gloo's all-reduce on
#     the same hosts (same run), and pool N against pool 1;
#   - quantized (min-max uint8) against plain on 4 hosts at 200 Mbit/s (no delay): effective
#     float32 bus bandwidth.
# The cases where each flow is limited on its own (per-flow caps, cubic under loss) are in
# flow_bench.sh. Needs root; prints a skip line otherwise. CSV rows on stdout. WAN_SIZE_MIB
# overrides 256; WAN_POOLS (default "1 2 4 8") picks the pools (a token PwW: pool P with
# PCCL_STRIPE_WINDOW=W, the striped ring's window; a token Ps: pool P with the striped ring on
# one lane, PCCL_STRIPE_LANES=0, as before session 8; a token PlK: pool P with
# PCCL_STRIPE_LANE_MIN_KIB=K, the lane minimum of ccoip_stripe_width (an op takes a group of the
# streams, halved while a lane would get less than K KiB of each chunk; consecutive ops take
# consecutive groups; K=0: no minimum, as before session 9; a token PmL: pool P
# with PCCL_STRIPE_MAX_LANES=L, at most L streams per op, 0: no cap, as before session 10; a
# token PcL: pool P with PCCL_STRIPE_SHARED_LANES=L, at most L streams per op while others run,
# 0: the same as alone, as before session 10); a trailing b, e.g. 1b: the same pool again as
# a contender of its own, so that 1b / 1 per round shows the measure's own noise), WAN_ROUNDS
# (default 1) runs that many interleaved rounds (odd rounds in reverse pool order) and reports
# each pool's median and its per-round ratios to pool 1 of the same round; each
# round also measures raw TCP h0 -> h1 with 1 and with P parallel streams (the op's bytes split
# over them, started together). WAN_LOSS (default 0.001) the loss per packet, WAN_DELAY_MS
# (default 25) the one-way delay, WAN_CC (default: the machine's, BBR here) the hosts'
# congestion control; WAN_ONLY_POOLS=1 skips gloo, the sndbuf row and the quantized run.
# WAN_TRACE_DIR: each pool run writes the peers' Chrome traces there (PCCL_TRACE_FILE) and
# prints wan_trace.py's per-op and per-stream timing of it (needs python3). WAN_TCPSTAT=1: each
# pool run also prints the hosts' TCP loss-recovery counters (/proc/net/netstat, summed, deltas).
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
TCP_BENCH=$rf/bench/allreduce/tcp_bench GLOO_BENCH=$rf/bench/allreduce/gloo_bench.py
NFQ_DELAY=$rf/bench/allreduce/nfq_delay
. "$rf/bench/allreduce/netns_lib.sh"
tmp=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
n=4 mib=${WAN_SIZE_MIB:-256}
bus() { awk -v n=$n -v m="$1" -v us="$2" 'BEGIN { printf "%.2f", 2*(n-1)/n*m*1048576/(us*1e-6)/1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a/b; else print "nan" }'; }

loss=${WAN_LOSS:-0.001} delay=${WAN_DELAY_MS:-25} cc=${WAN_CC:-}
if [ "$(id -u)" != 0 ] || ! ns_setup $n 500 || { [ -n "$cc" ] && ! ns_cc "$cc"; } || ! ns_impair "$delay" "$loss"; then
    echo "wan_bench: SKIPPED: cannot create shaped network namespaces (needs root, iproute2, iptables NFQUEUE${cc:+, $cc})" >&2
    exit 0
fi
cc=$(ip netns exec "$(ns_name 0)" cat /proc/sys/net/ipv4/tcp_congestion_control)
only=${WAN_ONLY_POOLS:-0} pools=${WAN_POOLS:-1 2 4 8} rounds=${WAN_ROUNDS:-1} trace=${WAN_TRACE_DIR:-}
ns_fg ns_tcp 0 1 "$mib" > "$tmp/t"
tcp=$(cat "$tmp/t")
echo "wan_bench: raw TCP h0 -> h1, 500 Mbit/s, $delay ms, $loss loss per packet, $cc: $tcp MB/s" >&2
# The same with the send buffer libpccl's data links set (SO_SNDBUF = net.core.wmem_max): the
# fairer baseline for what one stream can carry here.
wmax=$(cat /proc/sys/net/core/wmem_max 2>/dev/null || echo 0)
tcp_sb=$tcp gb=""
if [ "$only" != 1 ]; then
    tcp_sb=$(TCP_BENCH_SNDBUF=$wmax ns_tcp 0 1 "$mib")
    echo "allreduce_wan/raw_tcp_sndbuf_vs_raw_tcp,$tcp_sb,MB/s,$tcp,$(ratio "$tcp_sb" "$tcp")"
    ns_gloo $n "$mib" 1 > "$tmp/gloo"
    g=$(awk '$1=="gloo" {print $3}' "$tmp/gloo")
    if [ -n "$g" ]; then
        gb=$(bus "$mib" "$g")
        echo "allreduce_wan/n4_${mib}MiB_gloo_busbw_vs_raw_tcp,$gb,MB/s,$tcp,$(ratio "$gb" "$tcp")"
    fi
fi
# The 4 hosts' TCP counters (TcpExt and Tcp of each namespace), summed: "name value" lines.
tcpstat() {
    for i in 0 1 2 3; do ip netns exec "$(ns_name $i)" cat /proc/net/netstat /proc/net/snmp; done |
        awk '$1 == "TcpExt:" || $1 == "Tcp:" { if (!($1 in names)) { names[$1] = $0; next }
                split(names[$1], k); for (j = 2; j <= NF; j++) sum[k[j]] += $j; delete names[$1] }
             END { for (x in sum) print x, sum[x] }'
}
tcpdelta() {
    awk 'NR == FNR { a[$1] = $2; next } { d[$1] = $2 - a[$1] }
         END { printf "OutSegs %d RetransSegs %d TCPLossProbes %d TCPTimeouts %d TCPSackRecovery %d TCPLostRetransmit %d TCPSpuriousRTOs %d TCPLossProbeRecovery %d TCPSackRecoveryFail %d",
               d["OutSegs"], d["RetransSegs"], d["TCPLossProbes"], d["TCPTimeouts"], d["TCPSackRecovery"], d["TCPLostRetransmit"], d["TCPSpuriousRTOs"], d["TCPLossProbeRecovery"], d["TCPSackRecoveryFail"] }' "$1" "$2"
}
# Rounds interleave the pools (odd rounds in reverse order): the machine's load drifts.
rev=$(echo $pools | awk '{ for (i = NF; i > 0; i--) printf "%s ", $i }')
np_of() { echo "$1" | sed 's/[wslmcb].*//'; }
streams=$(for pool in $pools; do np_of "$pool"; done | sort -nu)
r=0
while [ $r -lt "$rounds" ]; do
    order=$pools; [ $((r % 2)) = 1 ] && order=$rev
    # Through ns_fg: a TERM then ends the bench at once, not after the transfer.
    for k in $streams; do ns_fg ns_tcp_n 0 1 $((mib / k)) "$k" > "$tmp/t" && cat "$tmp/t" >> "$tmp/tcp$k" && echo >> "$tmp/tcp$k"; done
    for pool in $order; do
        win="" lanes="" lmin="" lmax="" lshared="" np=$(np_of "$pool")
        cfg=${pool%b}
        case $cfg in *w*) win=${cfg#*w};; esac
        case $cfg in *l*) lmin=${cfg#*l};; esac
        case $cfg in *m*) lmax=${cfg#*m};; esac
        case $cfg in *c*) lshared=${cfg#*c};; esac
        case $cfg in *s) lanes=0;; esac
        [ "${WAN_TCPSTAT:-0}" = 1 ] && tcpstat > "$tmp/st0"
        ns_fg env PCCL_STRIPE_WINDOW=$win PCCL_STRIPE_LANES=$lanes PCCL_STRIPE_LANE_MIN_KIB=$lmin PCCL_STRIPE_MAX_LANES=$lmax PCCL_STRIPE_SHARED_LANES=$lshared ${trace:+PCCL_TRACE_FILE=$trace/pool$pool.r$r.%p.json} timeout 600 "$drv" "$master" "$peer" busbw --peers $n --netns "$(ns_list $n)" --ip 10.77.0. --sizes "$mib" --pool $np \
            --parts 16 --inflight $((np * 2)) --warmup 0 --iters 1 > "$tmp/pool$pool.$r" ||
            { echo "wan_bench: pool $pool round $r failed" >&2; continue; }
        p=$(awk '$1=="busbw" {print $3}' "$tmp/pool$pool.$r")
        b=$(bus "$mib" "$p"); echo "$b" >> "$tmp/bus$pool"; echo "$r $b" >> "$tmp/rbus$pool"
        echo "wan_bench: round $r pool $pool: $b MB/s bus (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        [ "${WAN_TCPSTAT:-0}" = 1 ] && tcpstat > "$tmp/st1" && echo "wan_bench: round $r pool $pool: TCP $(tcpdelta "$tmp/st0" "$tmp/st1")" >&2
        [ -n "$trace" ] && python3 "$rf/bench/allreduce/wan_trace.py" "wan_bench: round $r pool $pool" "$trace"/pool$pool.r$r.*.json >&2
    done
    r=$((r + 1))
done
median() { [ -s "$1" ] && sort -n "$1" | awk -v f="${2:-%.2f}" 'NF { v[n++] = $1 } END { if (n) printf f, n % 2 ? v[(n-1)/2] : (v[n/2-1] + v[n/2]) / 2 }'; }
echo "wan_bench: raw TCP, $mib MiB over k streams, per round: $(for k in $streams; do echo "k=$k:" $(cat "$tmp/tcp$k"); done)" >&2
t1=$(median "$tmp/tcp1")
for k in $streams; do
    tk=$(median "$tmp/tcp$k")
    [ "$k" != 1 ] && [ -n "$tk" ] && [ -n "$t1" ] &&
        echo "allreduce_wan/${cc}_raw_tcp_${k}_streams_vs_1_stream,$tk,MB/s,$t1,$(ratio "$tk" "$t1")"
done
# Per round, each pool against pool 1 of the same round: the ratios, their median and minimum,
# and how many fell below 0.95 (the goal's bound).
for pool in $pools; do
    [ "$pool" != 1 ] && [ -s "$tmp/rbus1" ] && [ -s "$tmp/rbus$pool" ] || continue
    awk 'NR == FNR { a[$1] = $2; next } ($1 in a) && a[$1] > 0 { printf "%.3f\n", $2 / a[$1] }' "$tmp/rbus1" "$tmp/rbus$pool" > "$tmp/ratio$pool"
    [ -s "$tmp/ratio$pool" ] || continue
    echo "wan_bench: pool $pool / pool 1 per round: $(tr '\n' ' ' < "$tmp/ratio$pool")(median $(median "$tmp/ratio$pool" %.3f), min $(sort -n "$tmp/ratio$pool" | head -1), below 0.95: $(awk '$1 < 0.95' "$tmp/ratio$pool" | wc -l) of $(wc -l < "$tmp/ratio$pool"))" >&2
done
p1=""
for pool in $pools; do
    pb=$(median "$tmp/bus$pool") || continue
    [ -n "$pb" ] || continue
    tk=$(median "$tmp/tcp$(np_of "$pool")")
    echo "allreduce_wan/n4_${mib}MiB_multi_pool${pool}_busbw_vs_raw_tcp,$pb,MB/s,$tcp,$(ratio "$pb" "$tcp")"
    [ -n "$tk" ] && echo "allreduce_wan/${cc}_n4_${mib}MiB_multi_pool${pool}_busbw_vs_raw_tcp_$(np_of "$pool")_streams,$pb,MB/s,$tk,$(ratio "$pb" "$tk")"
    [ "$only" != 1 ] && echo "allreduce_wan/n4_${mib}MiB_multi_pool${pool}_busbw_vs_raw_tcp_sndbuf,$pb,MB/s,$tcp_sb,$(ratio "$pb" "$tcp_sb")"
    [ -n "$gb" ] && echo "allreduce_wan/n4_${mib}MiB_multi_pool${pool}_busbw_vs_gloo,$pb,MB/s,$gb,$(ratio "$pb" "$gb")"
    [ $pool = 1 ] && p1=$pb
    [ $pool != 1 ] && [ -n "$p1" ] && echo "allreduce_wan/n4_${mib}MiB_multi_pool${pool}_busbw_vs_pool1,$pb,MB/s,$p1,$(ratio "$pb" "$p1")"
done
ns_cleanup
[ "$only" = 1 ] && exit 0

qmib=${WAN_QUANT_MIB:-64}
if ! ns_setup $n 200; then
    echo "wan_bench: SKIPPED the quantized run: cannot create namespaces" >&2
    exit 0
fi
for q in plain quant; do
    flag=""; [ $q = quant ] && flag=--quant
    "$drv" "$master" "$peer" busbw --peers $n --netns "$(ns_list $n)" --ip 10.77.0. --sizes "$qmib" \
        --warmup 1 --iters 2 $flag > "$tmp/$q" || echo "wan_bench: $q run failed" >&2
done
pl=$(awk '$1=="busbw" {print $3}' "$tmp/plain") qu=$(awk '$1=="busbw" {print $3}' "$tmp/quant")
if [ -n "$pl" ] && [ -n "$qu" ]; then
    plb=$(bus "$qmib" "$pl") qub=$(bus "$qmib" "$qu")
    echo "allreduce_quant200/n4_${qmib}MiB_minmax_u8_effective_busbw_vs_plain,$qub,MB/s,$plb,$(ratio "$qub" "$plb")"
fi
