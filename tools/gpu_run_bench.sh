#!/bin/sh
# run_bench.sh [DIR] (packed into build/gpu by tools/gpu_pack.sh): torch.sum timings (when torch
# is there), then cuda_bench, whose rows go to DIR/cuda_results.csv (default bench/out) under
# the header name,value,unit,baseline,ratio, and as a table on stdout; then device- against
# host-buffer all-reduce bus bandwidth, 16 to 256 MiB, 2 and 3 peers, with the copies alone
# (device_allreduce_test --bench); then the stream-ordered all-reduce (stream_allreduce_test
# --bench: a training-like step, and one op of 16 to 256 MiB, stream-ordered and blocking,
# against the ring on host buffers, with overlapped and with whole copies, and a kernel on
# another stream during an op; about 90 s). Every row's baseline was measured in the same run.
# PCCL_TEST_GPU_PER_PEER=1 on a machine of several GPUs gives each peer its own GPU.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-bench/out}
mkdir -p "$dir"
out=$dir/cuda_results.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null || true
if command -v python3 >/dev/null 2>&1; then
    python3 "$here/torch_sum.py" > "$tmp/torch.txt" || echo "torch_sum.py failed: no torch.sum rows" >&2
else
    : > "$tmp/torch.txt"
fi
echo "name,value,unit,baseline,ratio" > "$out"
"$here/cuda_bench" --torch "$tmp/torch.txt" >> "$out"
"$here/device_allreduce_test" "$here/pccl-master" --bench | grep '^device_allreduce' >> "$out" ||
    echo "device_allreduce_test --bench failed: no device all-reduce rows" >&2
"$here/stream_allreduce_test" "$here/pccl-master" --bench | grep -E '^(stream|device)_allreduce' >> "$out" ||
    echo "stream_allreduce_test --bench failed: no stream-ordered rows" >&2
column -s, -t < "$out" 2>/dev/null || cat "$out"
echo "wrote $out"
