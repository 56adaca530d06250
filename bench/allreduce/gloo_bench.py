#!/usr/bin/python3
"""gloo_bench.py RANK WORLD ADDR PORT SIZES_MIB ITERS [WARMUP]: torch.distributed all_reduce
(backend gloo, float32 Sum) of each size after WARMUP untimed ops (default 1); every rank prints
"gloo SIZE_MIB MEDIAN_US MIN_US CPU_US" per size, CPU_US the median over the timed ops of this
process's user + system time (every thread, getrusage) inside one all_reduce. The baseline that
ar_bench's PCCL figures are compared with, measured in the same run."""
import resource
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


rank, world, addr, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
sizes = [float(s) for s in sys.argv[5].split(",")]
iters = int(sys.argv[6])
warmup = int(sys.argv[7]) if len(sys.argv) > 7 else 1
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                        timeout=timedelta(seconds=300))
for mib in sizes:
    t = torch.ones(int(mib * 1048576 / 4), dtype=torch.float32)
    for _ in range(warmup):
        dist.all_reduce(t)
    times, cpus = [], []
    for _ in range(iters):
        dist.barrier()
        c0, t0 = cpu_s(), time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - t0)
        cpus.append(cpu_s() - c0)
    times.sort()
    cpus.sort()
    print(f"gloo {mib:g} {times[len(times) // 2] * 1e6:.0f} {times[0] * 1e6:.0f} {cpus[len(cpus) // 2] * 1e6:.0f}",
          flush=True)
dist.destroy_process_group()
