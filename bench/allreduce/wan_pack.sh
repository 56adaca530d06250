#!/bin/sh
# wan_pack.sh: collects the WAN benches (wan_bench.sh, flow_bench.sh) with what they run into
# (and crypt_bench.sh, aead_bench: encryption's cost on that host's cores) into build/wandev/ (or
# the folder given, under build/), for a lent machine that has root and network namespaces but no iproute2,
# iptables or libuv (the GPU host: kernel with veth, tbf, NFQUEUE, bbr and cubic): this tree's
# bench binaries, ip, tc, sysctl, chrt, ss, iptables (nft) with the xtables modules the benches use,
# and the shared libraries they need beyond libc. On that machine, from the repository root:
#   . build/wandev/env.sh; sh "$RUNFILES_DIR/libpccl/bench/allreduce/wan_bench.sh"
# (carry build/wandev; it must lie in the checkout the device copies). Run after `bazel build
# //bench/allreduce:all`.
set -eu
cd "$(dirname "$0")/../.."
W=${1:-build/wandev}
R=$W/rf/libpccl
rm -rf "$W"
mkdir -p "$W/bin" "$W/lib" "$W/xt" "$R/ccoip/master" "$R/bench/allreduce"
cp -L bazel-bin/ccoip/master/pccl-master "$R/ccoip/master/"
for b in ar_bench ar_bench_peer tcp_bench nfq_delay aead_bench; do cp -L "bazel-bin/bench/allreduce/$b" "$R/bench/allreduce/"; done
cp bench/allreduce/netns_lib.sh bench/allreduce/wan_bench.sh bench/allreduce/flow_bench.sh bench/allreduce/wan_trace.py \
    bench/allreduce/crypt_bench.sh "$R/bench/allreduce/"
for b in ip tc sysctl chrt ss; do cp -L "$(command -v $b)" "$W/bin/"; done
cp -L "$(command -v xtables-nft-multi)" "$W/bin/iptables" # one binary, its role from argv[0]
xt=$(dirname "$(find /usr/lib -name libxt_NFQUEUE.so | head -1)")
cp "$xt"/libxt_NFQUEUE.so "$xt"/libxt_statistic.so "$xt"/libxt_standard.so "$xt"/libipt_*.so "$W/xt/"
# Every library the carried programs load, except the C runtime the target has anyway.
for f in "$W"/bin/* "$R"/ccoip/master/* "$R"/bench/allreduce/ar_bench* "$R"/bench/allreduce/tcp_bench "$R"/bench/allreduce/nfq_delay; do
    ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' | while read -r l; do cp -L "$l" "$W/lib/"; done
{ echo "W=\$PWD/build/$(basename "$W")"; cat << 'EOF'
export PATH=$W/bin:$PATH LD_LIBRARY_PATH=$W/lib XTABLES_LIBDIR=$W/xt RUNFILES_DIR=$W/rf
# The development machine's TCP settings (BBR, 4 MiB socket buffers), so figures compare.
sysctl -qw net.ipv4.tcp_congestion_control=bbr net.core.wmem_max=4194304 net.core.rmem_max=4194304 \
    net.ipv4.tcp_wmem="4096 16384 4194304" net.ipv4.tcp_rmem="4096 131072 33554432"
EOF
} > "$W/env.sh"
chmod -R u+w "$W"
echo "packed: $W ($(du -sh "$W" | cut -f1))"
