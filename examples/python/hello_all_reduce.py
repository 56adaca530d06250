"""Hello, all-reduce: N peers each contribute a vector and all receive the sum.

    /usr/bin/python3 examples/python/hello_all_reduce.py             # master + 3 peers on 127.0.0.1
    /usr/bin/python3 examples/python/hello_all_reduce.py --peers 5
    # or against a running master (pccl-master, or python3 -m pccl.master), one command per peer:
    /usr/bin/python3 examples/python/hello_all_reduce.py --master 10.0.0.1:48148 --rank 0 --peers 2

Without --master the script starts a MasterNode in its own process and the peers as child
processes (this same file with --rank). Each peer:
  1. connects (blocks until the peers already in vote it in),
  2. votes newcomers in with update_topology() until all N peers are there,
  3. all-reduces a numpy vector (SUM) and a torch tensor (AVG) and checks the results.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

import numpy as np

try:
    import pccl
except ImportError:  # running from a source checkout without installing the package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import pccl
from pccl import Attribute, ReduceOp


def peer(master, rank, n):
    comm = pccl.Communicator(master, peer_group=0)
    comm.connect(n_attempts=10)
    print(f"[peer {rank}] connected; world size {comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)}", flush=True)

    # update_topology() is a collective of the accepted peers: everyone who is in calls it, and it
    # admits whoever is waiting. Loop until all n peers are in.
    while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < n:
        comm.update_topology()
        time.sleep(0.01)
    world = comm.get_attribute(Attribute.LOCAL_WORLD_SIZE)
    print(f"[peer {rank}] all {world} peers are in", flush=True)

    # numpy: every peer sends [rank+1, rank+1, ...]; everyone gets 1 + 2 + ... + n.
    send = np.full(8, rank + 1, dtype=np.float32)
    recv = np.empty_like(send)
    info = comm.all_reduce(send, recv, op=ReduceOp.SUM, tag=0)
    want = n * (n + 1) / 2
    assert (recv == want).all(), recv
    print(f"[peer {rank}] numpy SUM -> {recv[0]:g} (expected {want:g}); sent {info.tx_bytes} B, "
          f"received {info.rx_bytes} B", flush=True)

    # torch, in place: the average of the ranks.
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.full((4, 4), float(rank))
        comm.all_reduce(t, t, op=ReduceOp.AVG, tag=1)
        assert torch.allclose(t, torch.full((4, 4), (n - 1) / 2))
        print(f"[peer {rank}] torch AVG -> {t[0, 0].item():g} (expected {(n - 1) / 2:g})", flush=True)

    comm.are_peers_pending()  # a last collective: nobody leaves while another still reduces
    comm.close()
    print(f"[peer {rank}] done", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(n):
    address = f"127.0.0.1:{free_port()}"
    with pccl.MasterNode(address) as master:
        master.run()
        print(f"master listening on {address}", flush=True)
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--master", address, "--rank", str(r),
                                   "--peers", str(n)]) for r in range(n)]
        try:
            codes = [p.wait(timeout=120) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    ok = all(c == 0 for c in codes)
    print("all peers agree" if ok else f"a peer failed: exit codes {codes}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", type=int, default=3, help="number of peers (default 3)")
    ap.add_argument("--master", help="master address HOST:PORT; without it, start one here with the peers")
    ap.add_argument("--rank", type=int, default=0, help="this peer's number (for the printout)")
    args = ap.parse_args()
    if args.master is None:
        sys.exit(launch(args.peers))
    peer(args.master, args.rank, args.peers)


if __name__ == "__main__":
    main()
