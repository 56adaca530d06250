#!/bin/sh
# ss_fetch_bench.sh (issue 32): a newcomer catching up on the shared state from several
# distributors at once, hosts in network namespaces (tbf on the host's egress and on its switch
# port, netns_lib.sh). 4 distributors hold SS_TENSORS x SS_MIB MiB (default 8 x 32); ss_fetch_drv
# runs the rounds and measures each against a baseline of the same run. Two setups (SS_MODES,
# default "asym sym"):
#   asym  each host's uplink SS_UP_MBIT (default 100), its downlink SS_DOWN_MBIT (default 1000):
#         against min(sum of the distributors' uplinks, the newcomer's downlink) and against one
#         distributor (PCCL_SS_MAX_SOURCES=1)
#   sym   every link SS_SYM_MBIT (default 500) both ways: against the newcomer's downlink, a
#         distributor killed mid-fetch, two newcomers at once, and an all-reduce between two
#         distributors' hosts while they serve against the same all-reduce alone
# Needs root (ip netns); prints a skip line otherwise. CSV rows on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/tests/shared_state/ss_peer drv=$rf/bench/shared_state/ss_fetch_drv
. "$rf/bench/allreduce/netns_lib.sh"
logs=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$logs"' EXIT INT TERM

# run_mode MODE UP_MBIT DOWN_MBIT
run_mode() {
    if [ "$(id -u)" != 0 ] || ! ns_setup 6 "$3"; then
        ns_cleanup
        echo "ss_fetch_bench: SKIPPED: cannot create network namespaces (needs root and iproute2)" >&2
        return 0
    fi
    if [ "$2" != "$3" ]; then # the uplinks: each host's egress (the switch ports, the downlinks, stay)
        burst=$(( $2 * 1000000 / 8 / 1000 )); [ $burst -lt 16000 ] && burst=16000
        i=0
        while [ $i -lt 6 ]; do
            tc -n "$(ns_name $i)" qdisc replace dev eth0 root tbf rate "$2mbit" burst $burst latency 200ms || return 1
            i=$((i + 1))
        done
    fi
    extra=""
    [ "$1" = sym ] && extra=sym
    mkdir -p "$logs/$1"
    ns_fg "$drv" "$master" "$peer" "$(ns_list 6)" 10.77.0. "$logs/$1" "${SS_TENSORS:-8}" "${SS_MIB:-32}" "$2" "$3" $extra ||
        { echo "ss_fetch_bench: the $1 run failed (logs: $logs/$1)" >&2; trap 'ns_cleanup' EXIT; exit 1; }
    ns_cleanup
}

for mode in ${SS_MODES:-asym sym}; do
    case $mode in
    asym) run_mode asym "${SS_UP_MBIT:-100}" "${SS_DOWN_MBIT:-1000}" ;;
    sym) run_mode sym "${SS_SYM_MBIT:-500}" "${SS_SYM_MBIT:-500}" ;;
    *) echo "ss_fetch_bench: unknown mode $mode" >&2; exit 2 ;;
    esac
done
