#!/usr/bin/env python3
"""torch_sum.py: torch.sum of float32 over the sizes cuda_bench uses, timed like cuda_bench
(rotating over enough tensors to make 256 MiB, CUDA events, median of 11 rounds). Prints
"bytes GB/s" lines for cuda_bench --torch; prints nothing (exit 0) without torch or a GPU."""
import sys

try:
    import torch
except ImportError:
    print("torch_sum: skipped: no torch", file=sys.stderr)
    sys.exit(0)
if not torch.cuda.is_available():
    print("torch_sum: skipped: no GPU", file=sys.stderr)
    sys.exit(0)

MiB = 1 << 20
ROUNDS = 11
for nbytes in (32 * MiB, 256 * MiB, 1024 * MiB):
    nbuf = max(1, -(-256 * MiB // nbytes))
    iters = max(8, 2048 * MiB // nbytes)
    xs = [torch.rand(nbytes // 4, dtype=torch.float32, device="cuda") + 1.0 for _ in range(nbuf)]
    for i in range(3):
        torch.sum(xs[i % nbuf])
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(ROUNDS):
        e0.record()
        for i in range(iters):
            torch.sum(xs[i % nbuf])
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) / iters)
    ms = sorted(times)[ROUNDS // 2]
    gbps = nbytes / (ms * 1e-3) / 1e9
    print(f"torch_sum: float32 {nbytes} bytes {ms * 1e3:.1f} us {gbps:.0f} GB/s", file=sys.stderr)
    print(f"{nbytes} {gbps:.2f}")
    del xs
