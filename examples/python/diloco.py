"""DiLoCo on scikit-learn's digits with pccl.diloco (docs/diloco.md): each peer takes H inner
AdamW steps, then the peers average their pseudo-gradients in one all-reduce and take an outer
SGD-Nesterov step. The outer weights and momentum are shared state: a newcomer receives them.

    /usr/bin/python3 examples/python/diloco.py                  # master + 3 peers on 127.0.0.1;
                                                                # peer 2 SIGKILLed, a 4th joins
    /usr/bin/python3 examples/python/diloco.py --fragments 4 --delay 1 --compression uint8
    /usr/bin/python3 examples/python/diloco.py --master 10.0.0.1:48148 --rank 0   # one peer
"""
import argparse
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import torch

try:
    import pccl
except ImportError:  # running from a source checkout without installing the package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import pccl
from pccl import Attribute
from pccl.diloco import DiLoCo


def peer(a):
    from sklearn.datasets import load_digits
    if a.hold:  # the launcher's newcomer: everything imported, it connects when told (on stdin)
        sys.stdin.readline()
    torch.set_num_threads(1)
    x, y = load_digits(return_X_y=True)
    x, y = torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y)
    rng = np.random.default_rng(a.rank)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    inner = torch.optim.AdamW(model.parameters(), lr=3e-3)
    outer = torch.optim.SGD(model.parameters(), lr=0.7, momentum=0.9, nesterov=True)
    comm = pccl.Communicator(a.master)
    comm.connect(n_attempts=10)
    while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < a.wait_for:  # start together (optional)
        comm.update_topology()
    diloco = DiLoCo(model, outer, comm, sync_every=a.sync_every, fragments=a.fragments, delay=a.delay,
                    compression=a.compression)  # joins: a newcomer receives the outer state here
    print(f"[peer {a.rank}] joined at inner step {diloco.inner_step}", flush=True)
    while diloco.inner_step < a.steps:
        idx = torch.from_numpy(rng.choice(1500, 32, replace=False))
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        inner.zero_grad()
        loss.backward()
        inner.step()
        for r in diloco.step():
            print(f"[peer {a.rank}] outer step at {r.step}, fragment {r.fragment}: {'ok' if r.ok else r.result}, "
                  f"{r.world} peers, sent {r.tx_bytes} B, loss {loss.item():.3f}", flush=True)
        time.sleep(a.step_sleep)
    diloco.finish()
    with torch.no_grad():
        for p, o in zip(model.parameters(), diloco.outer_tensors()):
            p.copy_(o)
        acc = (model(x[1500:]).argmax(1) == y[1500:]).float().mean().item()
    print(f"[peer {a.rank}] final accuracy {acc:.4f} hash {diloco.outer_hash()[:16]} sent {diloco.bytes_sent} B",
          flush=True)
    comm.close()


def launch(a):
    """A master and 3 peers; peer 2 is SIGKILLed at an outer step, a 4th peer joins later (its process
    starts at once and connects when told, so that torch's import does not decide when it comes)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    lines, procs, finals, joined = queue.Queue(), {}, {}, {}

    def start(rank, wait_for, hold=False):
        cmd = [sys.executable, os.path.abspath(__file__), "--master", address, "--rank", str(rank), "--wait-for",
               str(wait_for), *a.passthrough] + (["--hold"] if hold else [])
        p = procs[rank] = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True,
                                           stdin=subprocess.PIPE if hold else subprocess.DEVNULL)
        threading.Thread(target=lambda: [lines.put((rank, ln)) for ln in p.stdout], daemon=True).start()

    with pccl.MasterNode(address) as master:
        master.run()
        try:
            for r in range(3):
                start(r, 3)
            if a.join_at:
                start(3, 0, hold=True)
            deadline = time.monotonic() + a.timeout
            while any(p.poll() is None for p in procs.values()) or not lines.empty():
                if time.monotonic() > deadline:
                    raise SystemExit("launcher: timed out")
                try:
                    rank, line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                print(line, end="", flush=True)
                m = re.search(r"outer step at (\d+)", line)
                if m and a.kill_at and int(m.group(1)) >= a.kill_at and "killed" not in joined:
                    print("launcher: killing peer 2 (SIGKILL)", flush=True)
                    os.killpg(procs[2].pid, signal.SIGKILL)
                    joined["killed"] = True
                if m and a.join_at and int(m.group(1)) >= a.join_at and "released" not in joined:
                    print("launcher: peer 3 connects", flush=True)
                    procs[3].stdin.write("go\n")
                    procs[3].stdin.flush()
                    joined["released"] = True
                m = re.search(r"\[peer (\d+)\] joined at inner step (\d+)", line)
                if m:
                    joined[int(m.group(1))] = int(m.group(2))
                m = re.search(r"\[peer (\d+)\] final accuracy (\S+) hash (\S+)", line)
                if m:
                    finals[int(m.group(1))] = (float(m.group(2)), m.group(3))
        finally:
            for p in procs.values():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    expected = {r for r in procs if not (a.kill_at and r == 2)}
    ok = (set(finals) == expected and all(procs[r].returncode == 0 for r in expected)
          and len({h for _, h in finals.values()}) == 1 and (not a.join_at or joined.get(3, 0) > 0) and min(acc for acc, _ in finals.values()) >= a.min_accuracy)
    print("launcher: OK - every peer holds the same outer model" if ok else f"launcher: FAILED {finals}", flush=True)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--master", help="master HOST:PORT: run one peer; without it, launch the whole demo")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--wait-for", type=int, default=0, help="peer: wait until this many peers are in")
    ap.add_argument("--steps", type=int, default=300, help="inner steps")
    ap.add_argument("--sync-every", type=int, default=20, help="H: inner steps per outer step (per fragment)")
    ap.add_argument("--fragments", type=int, default=1, help="Streaming DiLoCo: fragments synced in turn")
    ap.add_argument("--delay", type=int, default=0, help="inner steps an outer all-reduce overlaps")
    ap.add_argument("--compression", default=None, help="uint8, uint8:zps, uint16, bf16, fp16 (+noef)")
    ap.add_argument("--step-sleep", type=float, default=0.03, help="seconds per inner step (a slower demo)")
    ap.add_argument("--kill-at", type=int, default=60, help="launcher: SIGKILL peer 2 at this inner step (0: no)")
    ap.add_argument("--join-at", type=int, default=100, help="launcher: peer 3 joins at this inner step (0: no)")
    ap.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--min-accuracy", type=float, default=0.85)
    ap.add_argument("--timeout", type=float, default=240)
    a = ap.parse_args()
    if a.master:
        return peer(a)
    a.passthrough = [f"--{k}={v}" for k, v in (("steps", a.steps), ("sync-every", a.sync_every),
                                               ("fragments", a.fragments), ("delay", a.delay),
                                               ("step-sleep", a.step_sleep)) + ((("compression", a.compression),)
                                                                                if a.compression else ())]
    sys.exit(launch(a))


if __name__ == "__main__":
    main()
