#!/bin/sh
# flow_bench.sh (issue 18): the WAN cases where each TCP flow is limited on its own, so that a
# connection pool pays. Hosts in network namespaces (netns_lib.sh), one all-reduce striped over
# the pool (pcclAllReduce, float32 Sum), pool 1 / 2 / 4 / 8, against raw TCP with 1 and with N
# parallel streams between two of the hosts (same run):
#   - flowcap: 4 hosts, 500 Mbit/s link, 100 Mbit/s per flow (htb + u32 hash, ns_flowcap), 25 ms
#     one-way delay; FLOW_CAP_MIB (default 64) per op; goal pool N >= 0.9 x min(N x cap, link);
#   - linkonly: the same without the per-flow caps (BBR); goal pool N >= 0.95 x pool 1;
#   - cubic: 2 hosts, 500 Mbit/s, cubic instead of BBR (ns_cc adds it to the root namespace's
#     allowed list for the run and puts the old list back on exit), random loss per wire packet
#     (nfq_delay), 25 ms one-way and 0.1% loss with 16 MiB ops (median of 3), 50 ms and 1% with
#     one 8 MiB op (a single cubic flow carries ~0.2 MB/s there) (FLOW_LOSS_PROFILES); pools
#     1/4/8.
# Bus bandwidth = 2(N-1)/N x bytes / time (median of the op times). Needs root; prints a skip
# line otherwise. CSV rows on stdout (medians over FLOW_ROUNDS interleaved rounds, default 2).
#   - connect: 4 hosts, 500 Mbit/s, BBR, delay and loss per packet: the time of a topology round
#     (every pool stream reconnected, then a small all-reduce), the pool's streams connected at
#     once against one after another (FLOW_CONNECT_*, below); pools 1/4/8.
# FLOW_CASES picks cases (default "flowcap linkonly cubic connect"). Raw TCP: k streams of 32 MiB each
# (FLOW_TCP_MIB, default 32; flowcap, linkonly) or the op's size split over the k streams
# (cubic), started together (ns_tcp_n).
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
TCP_BENCH=$rf/bench/allreduce/tcp_bench NFQ_DELAY=$rf/bench/allreduce/nfq_delay
. "$rf/bench/allreduce/netns_lib.sh"
tmp=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
bus() { awk -v n="$1" -v m="$2" -v us="$3" 'BEGIN { printf "%.2f", 2*(n-1)/n*m*1048576/(us*1e-6)/1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a/b; else print "nan" }'; }
if [ "$(id -u)" != 0 ]; then
    echo "flow_bench: SKIPPED: needs root for network namespaces" >&2
    exit 0
fi

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
# of FILE KEY: the median of the values of KEY in FILE (lines "KEY VALUE").
of() { awk -v k="$2" '$1==k {print $2}' "$1" | median; }

# pools NAME HOSTS MIB WARMUP ITERS POOLS...: one run per pool size -> "$tmp/res_NAME".
pools() {
    name=$1 n=$2 mib=$3 warm=$4 iters=$5
    shift 5
    for pool in "$@"; do
        win=""; case $pool in *w*) win=${pool#*w};; esac
        ns_fg env PCCL_STRIPE_WINDOW=$win timeout 600 "$drv" "$master" "$peer" busbw --peers "$n" --netns "$(ns_list "$n")" --ip 10.77.0. --sizes "$mib" \
            --pool "${pool%%w*}" --warmup "$warm" --iters "$iters" > "$tmp/p" || { echo "flow_bench: $name pool $pool failed" >&2; continue; }
        us=$(awk '$1=="busbw" {print $3}' "$tmp/p")
        [ -n "$us" ] && echo "$pool $(bus "$n" "$mib" "$us")" >> "$tmp/res_$name"
    done
}

# tcp_of NAME MIB STREAMS...: raw TCP h0 -> h1 with k parallel streams of MIB each -> "$tmp/tcp_NAME".
# tcp_split NAME MIB STREAMS...: the same with MIB split over the k streams. Both through ns_fg:
# a TERM then ends the bench at once, not after the transfer.
tcp_of() {
    t_name=$1 t_mib=$2
    shift 2
    for k in "$@"; do ns_fg ns_tcp_n 0 1 "$t_mib" "$k" > "$tmp/t" && [ -s "$tmp/t" ] && echo "$k $(cat "$tmp/t")" >> "$tmp/tcp_$t_name"; done
}
tcp_split() {
    t_name=$1 t_mib=$2
    shift 2
    for k in "$@"; do ns_fg ns_tcp_n 0 1 $((t_mib / k)) "$k" > "$tmp/t" && [ -s "$tmp/t" ] && echo "$k $(cat "$tmp/t")" >> "$tmp/tcp_$t_name"; done
}

# rows NAME HOSTS MIB POOLS...: the medians over the rounds as CSV rows.
rows() {
    name=$1 n=$2 mib=$3
    shift 3
    one=$(of "$tmp/tcp_$name" 1) p1=$(of "$tmp/res_$name" 1)
    echo "flow_bench: $name: raw TCP $(tr '\n' ' ' < "$tmp/tcp_$name"); pools $(tr '\n' ' ' < "$tmp/res_$name")" >&2
    for k in "$@"; do
        t=$(of "$tmp/tcp_$name" "${k%%w*}") b=$(of "$tmp/res_$name" "$k")
        [ "$k" != 1 ] && [ "$k" = "${k%%w*}" ] && [ -n "$t" ] &&
            echo "allreduce_flow/${name}_raw_tcp_${k}_streams_vs_1_stream,$t,MB/s,$one,$(ratio "$t" "$one")"
        [ -n "$b" ] || continue
        echo "allreduce_flow/${name}_n${n}_${mib}MiB_pool${k}_busbw_vs_raw_tcp_${k%%w*}_streams,$b,MB/s,$t,$(ratio "$b" "$t")"
        [ "$k" != 1 ] && [ -n "$p1" ] &&
            echo "allreduce_flow/${name}_n${n}_${mib}MiB_pool${k}_busbw_vs_pool1,$b,MB/s,$p1,$(ratio "$b" "$p1")"
    done
}

rounds=${FLOW_ROUNDS:-2}
fpools=${FLOW_POOLS:-1 2 4 8} # flowcap, linkonly; a token PwW: pool P, PCCL_STRIPE_WINDOW=W
cases=${FLOW_CASES:-flowcap linkonly cubic connect}
for c in $cases; do
    case $c in
    flowcap|linkonly)
        mib=${FLOW_CAP_MIB:-64}
        if ! ns_setup 4 500 || { [ $c = flowcap ] && ! ns_flowcap 100 2>/dev/null; } || ! ns_impair 25 0; then
            echo "flow_bench: SKIPPED $c: cannot shape the namespaces" >&2
            ns_cleanup
            continue
        fi
        r=0
        while [ $r -lt "$rounds" ]; do
            tcp_of $c "${FLOW_TCP_MIB:-32}" $(echo $fpools | tr ' ' '\n' | sed 's/w.*//' | sort -nu)
            pools $c 4 "$mib" 1 2 $fpools
            r=$((r + 1))
        done
        rows $c 4 "$mib" $fpools
        ns_cleanup ;;
    cubic)
        # FLOW_LOSS_PROFILES: "DELAY_MS LOSS MIB ITERS", comma-separated.
        profiles=${FLOW_LOSS_PROFILES:-25 0.001 16 3,50 0.01 8 1}
        ifs=$IFS IFS=,
        for prof in $profiles; do
            IFS=$ifs
            set -- $prof
            d=$1 loss=$2 mib=$3 iters=${4:-3}
            name=cubic_${d}ms_loss$loss
            if ! ns_setup 2 500 || ! ns_cc cubic || ! ns_impair "$d" "$loss"; then
                echo "flow_bench: SKIPPED $name: cannot shape the namespaces or pick cubic" >&2
                ns_cleanup
                continue
            fi
            r=0
            while [ $r -lt "$rounds" ]; do
                tcp_split $name "$mib" 1 4 8
                pools $name 2 "$mib" 0 "$iters" 1 4 8
                r=$((r + 1))
            done
            rows $name 2 "$mib" 1 4 8
            ns_cleanup
        done
        IFS=$ifs ;;
    connect)
        # FLOW_CONNECT_PROFILES: "DELAY_MS LOSS", comma-separated (BBR, loss per packet; default
        # 25 ms / 0.1%, the cheap one; "50 0.01" is noisier and slower). A topology round
        # (ar_bench rounds: pcclUpdateTopology on 4 hosts, every pool stream reconnected, and
        # the first 4 KiB all-reduce after it), median of FLOW_CONNECT_ITERS (5) over
        # FLOW_CONNECT_ROUNDS (1) interleaved rounds, the pool's streams connected at once (the
        # library's way) against one after another (PCCL_P2P_CONNECTS=1, the way before).
        profiles=${FLOW_CONNECT_PROFILES:-25 0.001}
        ifs=$IFS IFS=,
        for prof in $profiles; do
            IFS=$ifs
            set -- $prof
            d=$1 loss=$2 name=connect_${1}ms_loss$2
            if ! ns_setup 4 500 || ! ns_impair "$d" "$loss"; then
                echo "flow_bench: SKIPPED $name: cannot shape the namespaces" >&2
                ns_cleanup
                continue
            fi
            r=0
            while [ $r -lt "${FLOW_CONNECT_ROUNDS:-1}" ]; do
                for pool in ${FLOW_CONNECT_POOLS:-1 4 8}; do
                    for at in 1 0; do
                        ns_fg env PCCL_P2P_CONNECTS=$at timeout 300 "$drv" "$master" "$peer" rounds --peers 4 --netns "$(ns_list 4)" \
                            --ip 10.77.0. --pool "$pool" --iters "${FLOW_CONNECT_ITERS:-5}" > "$tmp/p" ||
                            { echo "flow_bench: $name pool $pool connects $at failed" >&2; continue; }
                        ms=$(awk '$1=="rounds" {print $2}' "$tmp/p")
                        echo "flow_bench: $name round $r pool $pool $([ $at = 1 ] && echo serial || echo parallel): $(cat "$tmp/p") (load $(cut -d' ' -f1 /proc/loadavg))" >&2
                        [ -n "$ms" ] && echo "$pool $ms" >> "$tmp/$name.$at"
                    done
                done
                r=$((r + 1))
            done
            for pool in ${FLOW_CONNECT_POOLS:-1 4 8}; do
                ser=$(of "$tmp/$name.1" "$pool") par=$(of "$tmp/$name.0" "$pool")
                [ -n "$ser" ] && [ -n "$par" ] &&
                    echo "allreduce_flow/${name}_n4_pool${pool}_topology_round_ms_parallel_vs_serial_connects,$par,ms,$ser,$(ratio "$par" "$ser")"
            done
            ns_cleanup
        done
        IFS=$ifs ;;
    esac
done
