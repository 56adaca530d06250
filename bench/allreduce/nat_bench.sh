#!/bin/sh
# nat_bench.sh: pcclAllReduce among 4 hosts in network namespaces at 500 Mbit/s (netns_lib.sh)
# when some of them cannot be dialled (issue 30, docs/nat.md). A host firewall stands for a NAT
# router (to the others both look alike: nobody can dial in): a stateless one drops every
# inbound SYN (no punch gets through), a stateful one drops new inbound connections only (a
# punch's SYN answers one of ours: it gets through). Cases: all public (the baseline, same run);
# 1 and 2 unreachable peers (their ring edges reversed: the unreachable end dials); 3 unreachable
# behind stateful firewalls (two edges between unreachable peers, punched); the same behind
# stateless ones (the punch fails, those two edges run through pccl-relay on a fifth host with
# its own 500 Mbit/s link). 64 MiB float32 Sum, bus bandwidth, ratio against the all-public run.
# Needs root; prints a skip line otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
relay=$rf/ccoip/relay/pccl-relay
. "$rf/bench/allreduce/netns_lib.sh"
trap 'ns_cleanup' EXIT INT TERM
if [ "$(id -u)" != 0 ] || ! command -v iptables > /dev/null || ! ns_setup 5 500; then
    ns_cleanup
    echo "nat_bench: SKIPPED: cannot create network namespaces (needs root, iproute2 and iptables)" >&2
    exit 0
fi
tmp=$(mktemp -d)
rpid=""
trap '[ -n "$rpid" ] && kill $rpid; ns_cleanup; rm -rf "$tmp"' EXIT INT TERM
mib=${NAT_BENCH_MIB:-64}
ip netns exec "$(ns_name 4)" "$relay" --listen 10.77.0.5:48146 --log-level info > "$tmp/relay.out" 2> "$tmp/relay.log" &
rpid=$!
sleep 0.3
# firewall HOST -A|-D KIND: stateless (every inbound SYN dropped) or stateful (new connections)
firewall() {
    if [ "$3" = stateful ]; then ip netns exec "$(ns_name "$1")" iptables "$2" INPUT -p tcp -m conntrack --ctstate NEW -j DROP
    else ip netns exec "$(ns_name "$1")" iptables "$2" INPUT -p tcp --syn -j DROP; fi
}
run() { # run NAME KIND HOSTS...: hosts firewalled during the run; prints the median op in us
    name=$1 kind=$2; shift 2
    for h in "$@"; do firewall "$h" -A "$kind"; done
    AR_BENCH_MASTER_ARGS="--relay 10.77.0.5:48146" "$drv" "$master" "$peer" busbw --peers 4 --netns "$(ns_list 4)" \
        --ip 10.77.0. --sizes "$mib" --warmup 1 --iters 5 > "$tmp/$name" || echo "nat_bench: $name run failed" >&2
    for h in "$@"; do firewall "$h" -D "$kind"; done
    awk -v m="$mib" '$1=="busbw" && $2==m {print $3}' "$tmp/$name"
}
base=$(run public stateless)
for c in "reversed1 stateless 1" "reversed2 stateless 1 3" "punched2 stateful 1 2 3" "relayed2 stateless 1 2 3"; do
    set -- $c
    name=$1; shift
    pairs=$(grep -c paired "$tmp/relay.log")
    us=$(run "$name" "$@")
    echo "nat_bench: $name: relay pairs made: $(($(grep -c paired "$tmp/relay.log") - pairs))" >&2
    [ -n "$us" ] && [ -n "$base" ] || continue
    awk -v name="$name" -v m="$mib" -v us="$us" -v base="$base" 'BEGIN {
        bw = 2*3/4*m*1048576/(us*1e-6)/1e6; b = 2*3/4*m*1048576/(base*1e-6)/1e6
        printf "allreduce_nat500/n4_%gMiB_%s_busbw_vs_public,%.2f,MB/s,%.2f,%.3f\n", m, name, bw, b, bw/b }'
done
