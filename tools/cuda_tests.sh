#!/bin/sh
# cuda_tests.sh: `make test`'s CUDA part. Builds the CUDA flavour (--config=cuda) of the library,
# the cuda tests and the GPU benchmark, and runs the cuda tests; on a machine without a GPU they
# print "skipped: no GPU" and pass. Without nvcc (CI) it prints one skip line and succeeds.
# Ends with "cuda flavour: N passed, N failed". The full GPU run is `make test-gpu`.
set -u
cd "$(dirname "$0")/.."
NVCC=/usr/local/cuda/bin/nvcc # fixed by cuda/cuda.bzl
if [ ! -x "$NVCC" ]; then
    echo "cuda flavour: skipped: no nvcc at $NVCC (not compiled, not tested)"
    exit 0
fi
mkdir -p build
bep=build/cuda_test_events.json
rm -f "$bep"
bazel test --config=cuda --build_event_json_file="$bep" --keep_going --test_output=all \
    //tests/cuda:all //bench/cuda:cuda_bench //:libpccl.so //:libpccl_static "$@"
status=$?
summary=$(/usr/bin/python3 tools/count_tests.py "$bep")
counted=$?
echo "$summary" | sed '$s/^/cuda flavour: /'
[ $status -eq 0 ] && [ $counted -eq 0 ]
