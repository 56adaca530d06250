"""torch CUDA tensors through the Python package, on a GPU machine (make test-gpu runs it from the
packed folder with the CUDA flavour of libpccl.so):

    /usr/bin/python3 python/tests/gpu_torch_check.py          # a MasterNode and 2 peer processes

Each peer all-reduces CUDA tensors (float32 SUM and AVG, bfloat16 SUM, in place and not) and
checks them against the same all-reduce of CPU tensors, bit for bit, and SUM against the exact
values; then a shared-state sync of CUDA tensors in which peer 1 starts with zeros and receives
everything. Prints "skipped: ..." and exits 0 without torch, CUDA or a CUDA-enabled libpccl.
"""
import hashlib
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print(f"gpu_torch_check: skipped: {why}")
    sys.exit(0)


try:
    import torch
except ImportError:
    skip("no torch")
try:
    import pccl
except ImportError:
    sys.path.insert(0, os.path.join(HERE, ".."))
    import pccl
from pccl import Attribute, ReduceOp, SharedState, SharedStateSyncStrategy, TensorInfo


def peer(address, rank, n):
    comm = pccl.Communicator(address)
    comm.connect(n_attempts=10)
    while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < n:
        comm.update_topology()
    dev = torch.device("cuda")
    count = 3_000_001
    base = (torch.arange(count, dtype=torch.int64) * 7 + rank * 13) % 61
    exact = sum((torch.arange(count, dtype=torch.int64) * 7 + r * 13) % 61 for r in range(n))
    tag = 0
    for dtype, op, inplace in [(torch.float32, ReduceOp.SUM, False), (torch.float32, ReduceOp.AVG, True),
                               (torch.bfloat16, ReduceOp.SUM, False)]:
        cpu_in = base.to(dtype)
        cpu_out = torch.empty_like(cpu_in)
        comm.all_reduce(cpu_in, cpu_out, op=op, tag=tag)
        gpu = cpu_in.to(dev)
        gpu_out = gpu if inplace else torch.empty_like(gpu)
        info = comm.all_reduce(gpu, gpu_out, op=op, tag=tag + 1)
        tag += 2
        got = gpu_out.cpu()
        assert torch.equal(got.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                           cpu_out.view(torch.int16 if dtype == torch.bfloat16 else torch.int32)), \
            f"{dtype} {op}: device result differs from the host result"
        if op == ReduceOp.SUM:
            assert torch.equal(got.to(torch.int64), exact), f"{dtype} SUM: wrong values"
        assert info.local_world_size == n
        print(f"[peer {rank}] {dtype} {op.name} on {gpu.device}: ok, tx {info.tx_bytes} B", flush=True)

    weights = (torch.arange(1 << 20, dtype=torch.float32) * 0.5).to(dev)
    bias = torch.arange(1000, dtype=torch.float32).to(torch.bfloat16).to(dev)
    if rank == 1:
        weights.zero_()
        bias.zero_()
    state = SharedState([TensorInfo.from_torch(weights, "weights"), TensorInfo.from_torch(bias, "bias")])
    state.revision = 1
    # SEND_ONLY beside RECEIVE_ONLY (PCCL's rule kicks RECEIVE_ONLY beside ENFORCE_POPULAR)
    info = comm.sync_shared_state(state, strategy=SharedStateSyncStrategy.SEND_ONLY if rank != 1
                                  else SharedStateSyncStrategy.RECEIVE_ONLY)
    want_rx = (1 << 20) * 4 + 1000 * 2 if rank == 1 else 0
    assert info.rx_bytes == want_rx, f"rx {info.rx_bytes}, want {want_rx}"
    h = hashlib.sha256(weights.cpu().numpy().tobytes() + bias.cpu().view(torch.int16).numpy().tobytes()).hexdigest()
    print(f"[peer {rank}] shared state on cuda: rx {info.rx_bytes} B, hash {h[:16]}", flush=True)
    print(f"HASH {h}", flush=True)
    comm.are_peers_pending()  # nobody leaves while another still works
    comm.close()


def main():
    if len(sys.argv) == 4:
        peer(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
        return
    if not torch.cuda.is_available():
        skip("no CUDA device for torch")
    if not pccl.build_info()["has_cuda_support"]:
        skip(f"{pccl.library_path()} has no CUDA support")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    n = 2
    with pccl.MasterNode(address) as master:
        master.run()
        procs = [subprocess.Popen([sys.executable, __file__, address, str(r), str(n)], stdout=subprocess.PIPE,
                                  text=True) for r in range(n)]
        outs = [p.communicate(timeout=180)[0] for p in procs]
        master.interrupt()
    for o in outs:
        sys.stdout.write(o)
    hashes = {line.split()[1] for o in outs for line in o.splitlines() if line.startswith("HASH ")}
    ok = all(p.returncode == 0 for p in procs) and len(hashes) == 1 and sum(
        o.count("HASH ") for o in outs) == n
    print(f"gpu_torch_check: {'passed' if ok else 'FAILED'} ({n} peers, library {pccl.library_path()})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
