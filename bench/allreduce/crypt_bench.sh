#!/bin/sh
# crypt_bench.sh: what PCCL_ENCRYPT costs. pcclAllReduce bus bandwidth (4 peers, float32 Sum) with
# the p2p data links encrypted against the same run plain (the baseline, measured alternately in
# this run): on 4 hosts in network namespaces shaped to 500 Mbit/s (tbf; needs root, skipped
# otherwise) and on loopback. The AEAD's own per-core rate is aead_bench's. CSV rows on stdout.
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

# run LABEL ENCRYPT(0|1) ARGS... -> appends "LABEL SIZE US" lines
run() {
    label=$1 enc=$2
    shift 2
    if [ "$enc" = 1 ]; then
        PCCL_ENCRYPT=1 AR_BENCH_MASTER_ARGS="--secret-file $PCCL_SECRET_FILE --encrypt" "$drv" "$master" "$peer" busbw "$@"
    else
        AR_BENCH_MASTER_ARGS="--secret-file $PCCL_SECRET_FILE" "$drv" "$master" "$peer" busbw "$@"
    fi | awk -v l="$label" '$1=="busbw" {print l, $2, $3}' >> "$tmp/res"
}

# rows PREFIX N SIZES: best of the rounds, encrypted against plain
rows() {
    for mib in $(echo "$3" | tr , ' '); do
        p=$(awk -v m="$mib" '$1=="plain" && $2==m {print $3}' "$tmp/res" | sort -g | head -1)
        e=$(awk -v m="$mib" '$1=="enc" && $2==m {print $3}' "$tmp/res" | sort -g | head -1)
        [ -n "$p" ] && [ -n "$e" ] || continue
        awk -v pre="$1" -v n="$2" -v m="$mib" -v p="$p" -v e="$e" 'BEGIN {
            bp = 2*(n-1)/n*m*1048576/(p*1e-6)/1e6; be = 2*(n-1)/n*m*1048576/(e*1e-6)/1e6
            printf "%s/n%d_%gMiB_encrypted_busbw_vs_plain,%.2f,MB/s,%.2f,%.3f\n", pre, n, m, be, bp, be/bp }'
    done
}

sizes=${CRYPT_TBF_SIZES:-16,64}
if [ "$(id -u)" = 0 ] && ns_setup 4 500; then
    : > "$tmp/res"
    for round in 1 2; do
        for enc in 0 1; do
            label=plain; [ $enc = 1 ] && label=enc
            run $label $enc --peers 4 --netns "$(ns_list 4)" --ip 10.77.0. --sizes "$sizes" --warmup 1 --iters 3 ||
                echo "crypt_bench: tbf run failed" >&2
        done
    done
    rows allreduce_tbf500 4 "$sizes"
    ns_cleanup
else
    ns_cleanup
    echo "crypt_bench: tbf500: SKIPPED: cannot create network namespaces (needs root and iproute2)" >&2
fi

lsizes=${CRYPT_LOOP_SIZES:-16,64}
: > "$tmp/res"
for round in 1 2; do
    for enc in 0 1; do
        label=plain; [ $enc = 1 ] && label=enc
        run $label $enc --peers 4 --sizes "$lsizes" --warmup 1 --iters 5 || echo "crypt_bench: loopback run failed" >&2
    done
done
rows allreduce_loopback 4 "$lsizes"
