#!/bin/sh
# prof_bench.sh: runs prof_bench_driver with the paths of its helpers (CSV rows on stdout).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
exec "$rf/bench/profiler/prof_bench_driver" "$rf/ccoip/master/pccl-master" "$rf/bench/allreduce/ar_bench_peer" \
    "$rf/tests/profiler/libemptyprof.so"
