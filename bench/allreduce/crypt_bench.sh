#!/bin/sh
# crypt_bench.sh: what PCCL_ENCRYPT costs. pcclAllReduce (float32 Sum) with the p2p data links
# sealed by each AEAD a link may agree on (PCCL_AEAD: AES-256-OCB, what two x86-64 peers with AES-NI
# pick; AES-256-GCM, what a Windows peer brings; ChaCha20-Poly1305 where a CPU has no AES-NI) against
# the same run plain (the baseline), in interleaved rounds (the order reversed every other round),
# each figure the median over the rounds of a round's per-op median:
#   - 2 peers on loopback, every link on TCP (PCCL_SHM=0: sealed links never use shared memory, so
#     the plain baseline takes TCP too): bus bandwidth and CPU per op (every thread of both peers);
#   - 4 peers on loopback (same);
#   - 4 hosts in network namespaces shaped to 500 Mbit/s (tbf; needs root, skipped otherwise).
# The AEADs' own per-core rates are aead_bench's. CSV rows on stdout, notes on stderr.
# CRYPT_ROUNDS (3), CRYPT_LOOP_SIZES (MiB, 64), CRYPT_TBF_SIZES (16,64), CRYPT_TBF=0 (loopback only),
# CRYPT_AEADS (default
# "aes-256-ocb aes-256-gcm"; add chacha20-poly1305 for the third).
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
master=$rf/ccoip/master/pccl-master peer=$rf/bench/allreduce/ar_bench_peer drv=$rf/bench/allreduce/ar_bench
TCP_BENCH=$rf/bench/allreduce/tcp_bench GLOO_BENCH=$rf/bench/allreduce/gloo_bench.py
. "$rf/bench/allreduce/netns_lib.sh"
tmp=$(mktemp -d)
trap 'ns_cleanup; rm -rf "$tmp"' EXIT INT TERM
head -c 32 /dev/urandom | base64 > "$tmp/secret"
chmod 600 "$tmp/secret"
export PCCL_SECRET_FILE="$tmp/secret"
rounds=${CRYPT_ROUNDS:-3}
# ChaCha20-Poly1305 (the AEAD of CPUs without AES-NI) only on request: it adds a third to the run.
aeads=${CRYPT_AEADS:-aes-256-ocb aes-256-gcm}

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print 0}'; }
slug() { echo "$1" | tr -d -- '-'; } # aes-256-ocb -> aes256ocb

# run MODE ARGS... -> appends "MODE SIZE MEDIAN_US CPU_US" lines; MODE plain or an AEAD's name
run() {
    mode=$1
    shift
    if [ "$mode" = plain ]; then
        AR_BENCH_MASTER_ARGS="--secret-file $PCCL_SECRET_FILE" "$drv" "$master" "$peer" busbw "$@"
    else
        PCCL_AEAD=$mode PCCL_ENCRYPT=1 AR_BENCH_MASTER_ARGS="--secret-file $PCCL_SECRET_FILE --encrypt" \
            "$drv" "$master" "$peer" busbw "$@"
    fi | awk -v l="$mode" '$1=="busbw" {print l, $2, $3, $5}' >> "$tmp/res"
}

# rounds_of ARGS...: every mode once per round, the order reversed every other round
rounds_of() {
    r=1
    while [ $r -le "$rounds" ]; do
        order="plain $aeads"
        [ $((r % 2)) = 0 ] && order=$(for w in $order; do echo "$w"; done | tac | tr '\n' ' ')
        for mode in $order; do run "$mode" "$@" || echo "crypt_bench: $mode run failed" >&2; done
        r=$((r + 1))
    done
}

# rows PREFIX N SIZES: every AEAD against plain, medians over the rounds
rows() {
    for mib in $(echo "$3" | tr , ' '); do
        p=$(awk -v m="$mib" '$1=="plain" && $2==m {print $3}' "$tmp/res" | median)
        pc=$(awk -v m="$mib" '$1=="plain" && $2==m {print $4}' "$tmp/res" | median)
        [ "$p" != 0 ] || { echo "crypt_bench: $1: no plain figure at $mib MiB" >&2; continue; }
        for a in $aeads; do
            e=$(awk -v l="$a" -v m="$mib" '$1==l && $2==m {print $3}' "$tmp/res" | median)
            ec=$(awk -v l="$a" -v m="$mib" '$1==l && $2==m {print $4}' "$tmp/res" | median)
            [ "$e" != 0 ] || continue
            awk -v pre="$1" -v n="$2" -v m="$mib" -v p="$p" -v e="$e" -v pc="$pc" -v ec="$ec" -v s="$(slug "$a")" 'BEGIN {
                bp = 2*(n-1)/n*m*1048576/(p*1e-6)/1e6; be = 2*(n-1)/n*m*1048576/(e*1e-6)/1e6
                printf "%s/n%d_%gMiB_%s_busbw_vs_plain,%.2f,MB/s,%.2f,%.3f\n", pre, n, m, s, be, bp, be/bp
                if (pc > 0) printf "%s/n%d_%gMiB_%s_cpu_per_op_vs_plain,%.1f,ms,%.1f,%.3f\n", pre, n, m, s, ec/1e3, pc/1e3, ec/pc }'
        done
        # AES-256-OCB (what version 7 picks) against AES-256-GCM (what version 6 used), same rounds
        o=$(awk -v m="$mib" '$1=="aes-256-ocb" && $2==m {print $3}' "$tmp/res" | median)
        g=$(awk -v m="$mib" '$1=="aes-256-gcm" && $2==m {print $3}' "$tmp/res" | median)
        [ "$o" != 0 ] && [ "$g" != 0 ] && awk -v pre="$1" -v n="$2" -v m="$mib" -v o="$o" -v g="$g" 'BEGIN {
            bo = 2*(n-1)/n*m*1048576/(o*1e-6)/1e6; bg = 2*(n-1)/n*m*1048576/(g*1e-6)/1e6
            printf "%s/n%d_%gMiB_aes256ocb_busbw_vs_aes256gcm,%.2f,MB/s,%.2f,%.3f\n", pre, n, m, bo, bg, bo/bg }'
    done
}

echo "crypt_bench: load average $(cut -d' ' -f1-3 /proc/loadavg) at the start (loopback figures follow the machine's load)" >&2
lsizes=${CRYPT_LOOP_SIZES:-64}
for n in 2 4; do
    : > "$tmp/res"
    PCCL_SHM=0 rounds_of --peers $n --sizes "$lsizes" --warmup 2 --iters 7
    rows allreduce_loopback_tcp $n "$lsizes"
done

sizes=${CRYPT_TBF_SIZES:-16,64}
if [ "${CRYPT_TBF:-1}" = 0 ]; then
    echo "crypt_bench: tbf500: skipped (CRYPT_TBF=0)" >&2
elif [ "$(id -u)" = 0 ] && ns_setup 4 500; then
    : > "$tmp/res"
    rounds_of --peers 4 --netns "$(ns_list 4)" --ip 10.77.0. --sizes "$sizes" --warmup 1 --iters 3
    rows allreduce_tbf500 4 "$sizes"
    ns_cleanup
else
    ns_cleanup
    echo "crypt_bench: tbf500: SKIPPED: cannot create network namespaces (needs root and iproute2)" >&2
fi
echo "crypt_bench: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end" >&2
