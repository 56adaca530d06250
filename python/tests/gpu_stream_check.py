"""Stream-ordered all-reduce of torch CUDA tensors (Communicator.all_reduce(..., stream=...)), on a
GPU machine (make test-gpu runs it from the packed folder with the CUDA flavour of libpccl.so):

    /usr/bin/python3 python/tests/gpu_stream_check.py         # a MasterNode and 2 peer processes

Each peer runs 20 steps on a side stream and 20 on torch's current (default) stream: a kernel
writes the input on the stream, all_reduce(..., stream=s) returns a handle at once, a kernel
reads the result on the stream right after; the results must equal the exact sums and the host
all-reduce of the same input, bit for bit. Prints "skipped: ..." and exits 0 without torch, CUDA
or a CUDA-enabled libpccl.
"""
import hashlib
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print(f"gpu_stream_check: skipped: {why}")
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
from pccl import Attribute, ReduceOp


def peer(address, rank, n):
    comm = pccl.Communicator(address)
    comm.connect(n_attempts=10)
    while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < n:
        comm.update_topology()
    dev = torch.device("cuda")
    count = 1_000_003
    idx = torch.arange(count, dtype=torch.int64, device=dev)
    digest = hashlib.sha256()
    tag = 0
    for name, stream in [("side", torch.cuda.Stream()), ("current", torch.cuda.current_stream())]:
        with torch.cuda.stream(stream):
            x = torch.empty(count, dtype=torch.float32, device=dev)
            y = torch.empty_like(x)
            seen = []
            handles = []
            for step in range(20):
                x.copy_((idx * 7 + rank * 13 + step * 5) % 61)   # a kernel writes sendbuf on the stream
                handles.append(comm.all_reduce(x, y, op=ReduceOp.SUM, tag=tag, stream=stream))
                tag += 1
                seen.append(y * 1)                              # a kernel reads recvbuf right after
                if len(handles) > 8:                            # at most 16 may be in flight
                    ok, status, _ = handles[-9].wait()
                    assert ok, f"{name}: stream all-reduce failed: {status}"
            for h in handles:
                ok, status, _ = h.wait()
                assert ok, f"{name}: stream all-reduce failed: {status}"
            stream.synchronize()
        for step, got in enumerate(seen):
            exact = sum((idx * 7 + r * 13 + step * 5) % 61 for r in range(n)).to(torch.float32)
            assert torch.equal(got, exact), f"{name} step {step}: wrong values"
            cpu_in = ((idx * 7 + rank * 13 + step * 5) % 61).to(torch.float32).cpu()
            cpu_out = torch.empty_like(cpu_in)
            comm.all_reduce(cpu_in, cpu_out, op=ReduceOp.SUM, tag=tag)
            tag += 1
            assert torch.equal(got.cpu().view(torch.int32), cpu_out.view(torch.int32)), \
                f"{name} step {step}: differs from the host all-reduce"
            digest.update(got.cpu().numpy().tobytes())
        print(f"[peer {rank}] {name} stream: 20 steps exact and equal to the host path", flush=True)
    print(f"HASH {digest.hexdigest()}", flush=True)
    comm.are_peers_pending()
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
    print(f"gpu_stream_check: {'passed' if ok else 'FAILED'} ({n} peers, library {pccl.library_path()})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
