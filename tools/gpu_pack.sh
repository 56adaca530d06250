#!/bin/sh
# gpu_pack.sh: builds the GPU tests and benchmark (CUDA flavour, cudart and libuv linked
# statically) and collects them with their runner scripts in build/gpu/, a folder that runs on
# a GPU machine with a driver but no Bazel and no CUDA toolkit:
#   sh build/gpu/run_tests.sh          GPU tests, then "N passed, N failed"
#   sh build/gpu/run_bench.sh [DIR]    benchmark rows into DIR/cuda_results.csv (default bench/out)
# and the same folder as build/gpu.tgz (about a third of its size: the device machine takes at
# most 64 MiB of carried files; `tar xzf build/gpu.tgz` there restores build/gpu/).
set -eu
cd "$(dirname "$0")/.."
NVCC=/usr/local/cuda/bin/nvcc # fixed by cuda/cuda.bzl
[ -x "$NVCC" ] || { echo "gpu_pack: no nvcc at $NVCC: cannot build the CUDA flavour" >&2; exit 1; }
tests="cuda_table_test simplehash_gpu_test simplehash_many_gpu_test device_allreduce_test device_shared_state_test device_ss_multi_test stream_allreduce_test fingerprint_gpu_test"
bazel build --config=cuda $(for t in $tests; do printf '//tests/cuda:%s ' "$t"; done) //bench/cuda:cuda_bench //ccoip/master:pccl-master //:libpccl.so //fingerprint:pccl-fingerprint
bin=$(bazel info --config=cuda bazel-bin 2>/dev/null)
rm -rf build/gpu
mkdir -p build/gpu
for t in $tests; do cp -f "$bin/tests/cuda/$t" build/gpu/; done
cp -f "$bin/bench/cuda/cuda_bench" "$bin/ccoip/master/pccl-master" "$bin/fingerprint/pccl-fingerprint" build/gpu/
# The Python package with the CUDA flavour of libpccl.so (and the libuv it links) inside it.
mkdir -p build/gpu/python/tests
cp -rf python/pccl build/gpu/python/
rm -rf build/gpu/python/pccl/__pycache__
cp -f python/tests/gpu_torch_check.py python/tests/gpu_stream_check.py build/gpu/python/tests/
cp -f "$bin/libpccl.so" build/gpu/python/pccl/
cp -fL "$(/sbin/ldconfig -p | awk '/libuv\.so\.1 .*x86-64/ {print $NF; exit}')" build/gpu/python/pccl/libuv.so.1
cp -f bench/cuda/torch_sum.py build/gpu/
cp -f tools/gpu_run_tests.sh build/gpu/run_tests.sh
cp -f tools/gpu_run_bench.sh build/gpu/run_bench.sh
chmod -R u+w build/gpu
tar czf build/gpu.tgz build/gpu
echo "packed: build/gpu ($(du -sh build/gpu | cut -f1)), build/gpu.tgz ($(du -sh build/gpu.tgz | cut -f1)); on the GPU machine: sh build/gpu/run_tests.sh, sh build/gpu/run_bench.sh"
