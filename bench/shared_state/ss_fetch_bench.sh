#!/bin/sh
# ss_fetch_bench.sh (issue 32): a newcomer catching up on the shared state from several
# distributors at once, hosts in network namespaces with asymmetric links (each host's uplink
# SS_UP_MBIT, default 100, its downlink SS_DOWN_MBIT, default 1000; tbf on the host's egress and
# on its switch port, netns_lib.sh). 4 distributors hold SS_TENSORS x SS_MIB MiB (default 8 x 32);
# ss_fetch_drv runs the rounds and measures against the limit min(sum of the distributors'
# uplinks, the newcomer's downlink) and against one distributor (PCCL_SS_MAX_SOURCES=1) in the
# same run. Needs root (ip netns); prints a skip line otherwise. CSV rows on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/tests/shared_state/ss_peer drv=$rf/bench/shared_state/ss_fetch_drv
up=${SS_UP_MBIT:-100} down=${SS_DOWN_MBIT:-1000}
. "$rf/bench/allreduce/netns_lib.sh"
trap 'ns_cleanup' EXIT INT TERM
if [ "$(id -u)" != 0 ] || ! ns_setup 6 "$down"; then
    ns_cleanup
    echo "ss_fetch_bench: SKIPPED: cannot create network namespaces (needs root and iproute2)" >&2
    exit 0
fi
# The uplinks: each host's egress at $up (the switch ports, the downlinks, stay at $down).
burst=$(( up * 1000000 / 8 / 1000 )); [ $burst -lt 16000 ] && burst=16000
i=0
while [ $i -lt 6 ]; do
    tc -n "$(ns_name $i)" qdisc replace dev eth0 root tbf rate "${up}mbit" burst $burst latency 200ms || exit 1
    i=$((i + 1))
done
logs=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$logs"' EXIT INT TERM
"$drv" "$master" "$peer" "$(ns_list 6)" 10.77.0. "$logs" "${SS_TENSORS:-8}" "${SS_MIB:-32}" "$up" "$down" ||
    { echo "ss_fetch_bench: the run failed (logs: $logs)" >&2; trap 'ns_cleanup' EXIT; exit 1; }
