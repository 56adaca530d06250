#!/bin/sh
# topo_bench.sh: see BUILD.bazel. Needs root (ip netns, tc htb); prints a skip line otherwise.
# CSV rows (name,value,unit,baseline,ratio) on stdout.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$here/../..
exec "$rf/tests/topology/topo_netns_test" "$rf/ccoip/master/pccl-master" "$rf/tests/topology/topo_peer" --bench
