# netns_lib.sh: sourced by the shaped-network benchmarks. Hosts h0..hN-1 in network namespaces,
# one veth each into a bridge in a "switch" namespace, 10.77.0.(i+1)/24; nothing in the root
# namespace. Shaping per /work/shared/NETWORK.md: tbf on each host's egress and on its switch
# port (the host's ingress), burst = max(1 ms at the rate, 16000 bytes) with gso_max_size capped
# at 0.9 x burst (smaller bursts make tbf split GSO batches in software and starve the CPU).
# Optional per-host ingress delay and random loss per wire packet (NFQUEUE + nfq_delay);
# optional per-flow rate caps (ns_flowcap) and congestion control per host (ns_cc). ns_cleanup
# removes the namespaces and restores any root sysctl ns_cc changed: call it from an EXIT trap.

NS_PREFIX=${NS_PREFIX:-arb$$}
NS_HOSTS=""
NS_DELAY_PIDS=""
NS_RT=""
command -v chrt > /dev/null 2>&1 && chrt -f 20 true 2>/dev/null && NS_RT="chrt -f 20"

ns_name() { echo "${NS_PREFIX}h$1"; }

# ns_setup N RATE_MBIT: creates the hosts; returns non-zero (after cleaning up) when it cannot.
ns_setup() {
    n=$1 rate=$2
    burst=$(( rate * 1000000 / 8 / 1000 )); [ $burst -lt 16000 ] && burst=16000
    NS_RATE=$rate NS_BURST=$burst
    gso=$(( burst * 9 / 10 ))
    ip netns add "${NS_PREFIX}sw" 2>/dev/null || return 1
    NS_HOSTS="${NS_PREFIX}sw"
    ip -n "${NS_PREFIX}sw" link add br0 type bridge || return 1
    ip -n "${NS_PREFIX}sw" link set br0 up
    i=0
    while [ $i -lt "$n" ]; do
        h=$(ns_name $i)
        ip netns add "$h" || return 1
        NS_HOSTS="$NS_HOSTS $h"
        ip link add eth0 netns "$h" type veth peer name "p$i" netns "${NS_PREFIX}sw" || return 1
        ip -n "${NS_PREFIX}sw" link set "p$i" master br0
        ip -n "${NS_PREFIX}sw" link set "p$i" up
        ip -n "$h" addr add "10.77.0.$((i + 1))/24" dev eth0
        ip -n "$h" link set eth0 gso_max_size $gso 2>/dev/null
        ip -n "${NS_PREFIX}sw" link set "p$i" gso_max_size $gso 2>/dev/null
        ip -n "$h" link set eth0 up
        ip -n "$h" link set lo up
        tc -n "$h" qdisc add dev eth0 root tbf rate "${rate}mbit" burst $burst latency 200ms || return 1
        tc -n "${NS_PREFIX}sw" qdisc add dev "p$i" root tbf rate "${rate}mbit" burst $burst latency 200ms || return 1
        i=$((i + 1))
    done
    return 0
}

# ns_impair DELAY_MS LOSS: on every host's ingress, one delay line (nfq_delay on NFQUEUE i)
# holds each packet DELAY_MS and drops a fraction LOSS (e.g. 0.001) of the packets at random,
# each wire packet on its own (nfq_delay.c: the kernel splits GSO batches for the queue).
ns_impair() {
    delay=$1 loss=$2 i=0
    [ "$delay" = 0 ] && [ "$loss" = 0 ] && return 0
    for h in $NS_HOSTS; do
        case $h in *sw) continue;; esac
        ip netns exec "$h" iptables -t mangle -A PREROUTING -i eth0 -j NFQUEUE --queue-num $i || return 1
        # Real-time priority: on a loaded box a late wake-up of the delay line adds queueing
        # delay that a real path would not have (the more packets, the more it adds).
        ip netns exec "$h" $NS_RT "$NFQ_DELAY" $i "$delay" "$loss" 2>>"${NS_LOG:-/dev/null}" &
        NS_DELAY_PIDS="$NS_DELAY_PIDS $!"
        i=$((i + 1))
    done
    sleep 0.3
}

# ns_flowcap CAP_MBIT: every TCP flow leaving a host is held to CAP_MBIT within the link rate.
# This kernel has no fq (no maxrate), sfq, flower or flow classifier, so: htb replaces the host's
# egress tbf (root class at the link rate; 256 leaf classes of ceil CAP_MBIT), and a u32 hash
# table on the low byte of the TCP source port picks the leaf. The host's ephemeral ports are
# narrowed to 256 consecutive ones (ip_local_port_range; tcp_tw_reuse for the TIME_WAITs), so no
# two flows of one host share a leaf. Each flow's data goes out from the connecting side's
# ephemeral port; the ACKs of all flows a listener accepted share the listener's leaf.
ns_flowcap() {
    ns_cap=$1
    for ns_h in $NS_HOSTS; do
        case $ns_h in *sw) continue;; esac
        ip netns exec "$ns_h" sysctl -qw net.ipv4.ip_local_port_range="40000 40255" net.ipv4.tcp_tw_reuse=1 || return 1
        ns_b=$(mktemp)
        {
            echo "qdisc replace dev eth0 root handle 1: htb default 2"
            echo "class add dev eth0 parent 1: classid 1:1 htb rate ${NS_RATE}mbit ceil ${NS_RATE}mbit burst $NS_BURST cburst $NS_BURST"
            echo "class add dev eth0 parent 1:1 classid 1:2 htb rate 1mbit ceil ${NS_RATE}mbit burst $NS_BURST cburst $NS_BURST"
            ns_k=0
            while [ $ns_k -lt 256 ]; do
                ns_c=$(printf %x $((256 + ns_k)))
                echo "class add dev eth0 parent 1:1 classid 1:$ns_c htb rate 1mbit ceil ${ns_cap}mbit burst $NS_BURST cburst $NS_BURST"
                ns_k=$((ns_k + 1))
            done
            echo "filter add dev eth0 parent 1: prio 1 handle 2: protocol ip u32 divisor 256"
            ns_k=0
            while [ $ns_k -lt 256 ]; do
                echo "filter add dev eth0 parent 1: prio 1 protocol ip u32 ht 2:$(printf %x $ns_k): match u32 0 0 flowid 1:$(printf %x $((256 + ns_k)))"
                ns_k=$((ns_k + 1))
            done
            echo "filter add dev eth0 parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x00ff0000 at 20 link 2:"
        } > "$ns_b"
        tc -n "$ns_h" -batch "$ns_b" || { rm -f "$ns_b"; return 1; }
        rm -f "$ns_b"
    done
}

# ns_cc ALG: the hosts' congestion control (e.g. cubic instead of the machine's BBR). A namespace
# may only pick from the root namespace's tcp_allowed_congestion_control (here "reno bbr"; cubic
# is loaded but not allowed), so ALG is added to that list for the run; ns_cleanup restores the
# old list. Fails when ALG is not available.
NS_CC_OLD=""
ns_cc() {
    ns_allowed=/proc/sys/net/ipv4/tcp_allowed_congestion_control
    ns_cur=$(cat $ns_allowed) || return 1
    case " $ns_cur " in
    *" $1 "*) ;;
    *)
        [ -n "$NS_CC_OLD" ] || NS_CC_OLD=$ns_cur
        echo "$ns_cur $1" > $ns_allowed 2>/dev/null || return 1 ;;
    esac
    for ns_h in $NS_HOSTS; do
        case $ns_h in *sw) continue;; esac
        ip netns exec "$ns_h" sysctl -qw net.ipv4.tcp_congestion_control="$1" || return 1
    done
}

# ns_fg CMD...: runs CMD in the background and waits for it. A shell runs a trap only once its
# foreground command has ended (an ar_bench run: minutes), but interrupts a wait: so a TERM or
# INT reaches the bench's trap, and ns_cleanup, at once.
NS_FG=""
ns_fg() {
    "$@" &
    NS_FG=$!
    wait $NS_FG
    ns_rc=$?
    NS_FG=""
    return $ns_rc
}

ns_cleanup() {
    [ -n "$NS_FG" ] && kill "$NS_FG" 2>/dev/null
    for p in $NS_DELAY_PIDS; do kill "$p" 2>/dev/null; done
    for p in $NS_DELAY_PIDS; do wait "$p" 2>/dev/null; done
    NS_DELAY_PIDS=""
    for h in $NS_HOSTS; do
        ip netns pids "$h" 2>/dev/null | while read -r p; do kill -9 "$p" 2>/dev/null; done
        ip netns del "$h" 2>/dev/null
    done
    NS_HOSTS=""
    if [ -n "$NS_CC_OLD" ]; then
        echo "$NS_CC_OLD" > /proc/sys/net/ipv4/tcp_allowed_congestion_control
        NS_CC_OLD=""
    fi
}

# ns_tcp FROM TO MIB: raw single-stream TCP goodput (MB/s) from host FROM to host TO.
ns_tcp() {
    fifo=$(mktemp -u)
    mkfifo "$fifo"
    ip netns exec "$(ns_name $2)" "$TCP_BENCH" server "10.77.0.$(($2 + 1))" > "$fifo" &
    sp=$!
    read -r _ port < "$fifo"
    ip netns exec "$(ns_name $1)" "$TCP_BENCH" client "10.77.0.$(($2 + 1))" "$port" "$3" | awk '{print $2}'
    wait $sp
    rm -f "$fifo"
}

# ns_tcp_n FROM TO MIB N: N parallel raw TCP streams from FROM to TO, MIB MiB each, started
# together -> their aggregate goodput (MB/s: all bytes over the time until the last finished);
# nothing when a stream failed.
ns_tcp_n() {
    k=0 ports="" spids="" cpids=""
    while [ $k -lt "$4" ]; do
        fifo=$(mktemp -u)
        mkfifo "$fifo"
        ip netns exec "$(ns_name $2)" "$TCP_BENCH" server "10.77.0.$(($2 + 1))" > "$fifo" &
        spids="$spids $!"
        read -r _ port < "$fifo"
        rm -f "$fifo"
        ports="$ports $port"
        k=$((k + 1))
    done
    t0=$(date +%s.%N)
    for port in $ports; do
        ip netns exec "$(ns_name $1)" "$TCP_BENCH" client "10.77.0.$(($2 + 1))" "$port" "$3" > /dev/null &
        cpids="$cpids $!"
    done
    ok=1
    for p in $cpids; do wait "$p" || ok=0; done
    t1=$(date +%s.%N)
    wait $spids
    # Nothing when a stream failed: callers take medians over what was measured.
    [ $ok = 1 ] && awk -v n="$4" -v m="$3" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", n*m*1.048576/(b-a) }'
}

# ns_gloo N SIZES ITERS: gloo ranks on hosts 0..N-1 -> rank 0's lines "gloo SIZE MEDIAN_US MIN_US"
ns_gloo() {
    port=$(( 29500 + $$ % 1000 )) r=1 gpids=""
    while [ $r -lt "$1" ]; do
        GLOO_SOCKET_IFNAME=eth0 ip netns exec "$(ns_name $r)" /usr/bin/python3 "$GLOO_BENCH" $r "$1" 10.77.0.1 $port "$2" "$3" > /dev/null 2>&1 &
        gpids="$gpids $!"
        r=$((r + 1))
    done
    GLOO_SOCKET_IFNAME=eth0 timeout 900 ip netns exec "$(ns_name 0)" /usr/bin/python3 "$GLOO_BENCH" 0 "$1" 10.77.0.1 $port "$2" "$3" 2>/dev/null
    wait $gpids   # not a bare wait: the delay lines run in the background too
}

ns_list() { # N -> "h0,h1,..."
    out="" i=0
    while [ $i -lt "$1" ]; do out="$out${out:+,}$(ns_name $i)"; i=$((i + 1)); done
    echo "$out"
}
