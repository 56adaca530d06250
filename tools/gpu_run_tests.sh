#!/bin/sh
# run_tests.sh (packed into build/gpu by tools/gpu_pack.sh): the GPU tests from their binaries;
# needs a driver, no Bazel, no toolkit. Where compute-sanitizer exists, the quick hash test runs
# again under memcheck (a read past the end of an allocation), racecheck and synccheck (the
# shared memory and barriers of the in-kernel tree). Last line:
# "N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
pass=0
fail=0
run() {
    name=$1
    shift
    echo "== $name"
    if "$@"; then pass=$((pass + 1)); else echo "FAILED: $name"; fail=$((fail + 1)); fi
}
gpu=no
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null && gpu=yes
[ $gpu = yes ] || echo "no GPU found (nvidia-smi): the tests will say skipped"
run cuda_table_test "$here/cuda_table_test"
run simplehash_gpu_test "$here/simplehash_gpu_test"
run simplehash_many_gpu_test "$here/simplehash_many_gpu_test"
run device_allreduce_test "$here/device_allreduce_test" "$here/pccl-master"
run device_shared_state_test "$here/device_shared_state_test" "$here/pccl-master"
run device_ss_multi_test "$here/device_ss_multi_test" "$here/pccl-master"
run stream_allreduce_test "$here/stream_allreduce_test" "$here/pccl-master"
run fingerprint_gpu_test "$here/fingerprint_gpu_test"
# pccl-fingerprint finds the packed libuv.so.1 beside the Python package's libpccl.so.
run "pccl-fingerprint (full, twice: same)" env LD_LIBRARY_PATH="$here/python/pccl" sh -c \
    "'$here/pccl-fingerprint' --out /tmp/pccl_fp.txt && '$here/pccl-fingerprint' --compare /tmp/pccl_fp.txt"
if command -v python3 >/dev/null 2>&1; then
    run "python: torch CUDA tensors" env PCCL_LIBRARY="$here/python/pccl/libpccl.so" \
        python3 "$here/python/tests/gpu_torch_check.py"
    run "python: all_reduce(stream=...)" env PCCL_LIBRARY="$here/python/pccl/libpccl.so" \
        python3 "$here/python/tests/gpu_stream_check.py"
else
    echo "python: torch CUDA tensors: skipped (no python3)"
fi
san=$(command -v compute-sanitizer 2>/dev/null || true)
[ -z "$san" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && san=/usr/local/cuda/bin/compute-sanitizer
if [ $gpu = yes ] && [ -n "$san" ]; then
    for tool in memcheck racecheck synccheck; do
        run "simplehash_gpu_test --quick under compute-sanitizer $tool" \
            "$san" --tool $tool --error-exitcode 1 --print-limit 20 "$here/simplehash_gpu_test" --quick
    done
    for tool in memcheck racecheck synccheck; do
        run "simplehash_many_gpu_test --quick under compute-sanitizer $tool" \
            "$san" --tool $tool --error-exitcode 1 --print-limit 20 "$here/simplehash_many_gpu_test" --quick
    done
    # Device buffers in pcclAllReduce and in a shared-state sync (peer processes too).
    run "device_allreduce_test under compute-sanitizer memcheck" \
        "$san" --tool memcheck --target-processes all --error-exitcode 1 --print-limit 20 \
        "$here/device_allreduce_test" "$here/pccl-master"
    run "device_shared_state_test under compute-sanitizer memcheck" \
        "$san" --tool memcheck --target-processes all --error-exitcode 1 --print-limit 20 \
        "$here/device_shared_state_test" "$here/pccl-master"
    # The stream-ordered all-reduce (peer processes too) and the fingerprint kernels, quick forms.
    run "stream_allreduce_test --quick under compute-sanitizer memcheck" \
        "$san" --tool memcheck --target-processes all --error-exitcode 1 --print-limit 20 \
        "$here/stream_allreduce_test" "$here/pccl-master" --quick
    for tool in memcheck racecheck synccheck; do
        run "fingerprint_gpu_test --quick under compute-sanitizer $tool" \
            "$san" --tool $tool --error-exitcode 1 --print-limit 20 "$here/fingerprint_gpu_test" --quick
    done
else
    echo "compute-sanitizer: skipped (no GPU or no compute-sanitizer)"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
