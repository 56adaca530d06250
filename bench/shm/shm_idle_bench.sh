#!/bin/sh
# shm_idle_bench.sh: runs shm_idle_bench.py (the driver; only /usr/bin/python3 is sure to be here).
rf=${RUNFILES_DIR:-$0.runfiles}/libpccl
[ -d "$rf" ] || rf=$(cd "$(dirname "$0")/../.." && pwd)
exec /usr/bin/python3 "$rf/bench/shm/shm_idle_bench.py" "$rf" "$@"
