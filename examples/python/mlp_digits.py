"""Data-parallel training of a small torch MLP on scikit-learn's digits (bundled: no download), with
peers that join and leave mid-run.

    /usr/bin/python3 examples/python/mlp_digits.py          # the whole show on 127.0.0.1
    # with a libpccl that has no pcclSynchronizeSharedState yet (no joiners then):
    /usr/bin/python3 examples/python/mlp_digits.py --no-shared-state
    # or one peer against a running master:
    /usr/bin/python3 examples/python/mlp_digits.py --master 10.0.0.1:48148 --rank 0

Each peer runs the loop of PCCL's own examples:
  1. update_topology()      - admit whoever waits (not on the first iteration: connect() just did)
  2. sync_shared_state()    - parameters, Adam's state and the step counter (the revision) become
                              the popular content: a newcomer receives them; a peer that already
                              has them receives nothing, which this script asserts - all peers hold
                              bit-identical parameters after every step
  3. forward/backward on a batch of its own, all_reduce(AVG) of the flattened gradients
  4. optimizer.step(); revision += 1
A step whose all-reduce fails (a peer died) is dropped by every survivor alike (the library reports
a failed collective to all its members), and the next update_topology() rebuilds the ring.

Without --master the script is the launcher: it starts a MasterNode and peers 0, 1, 2; kills peer
1 with SIGKILL at step --kill-at; starts peer 3 at step --join-at; peer 2 leaves on its own at step
--leave-at; at the end the peers that finished print the hash of their model and optimizer state,
and the launcher checks that the hashes are equal and the test accuracy is good. With
--no-shared-state (a libpccl without pcclSynchronizeSharedState) nobody can join mid-run: peer 3
starts with the others, and the bit-identity shows in the final hashes only.
"""
import argparse
import hashlib
import os
import queue
import re
import signal
import socket
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
from pccl import Attribute, PCCLError, ReduceOp, Result

# Failures that the peers that remain recover from with a new topology round.
RECOVERABLE = (Result.RANK_CONNECTION_LOST, Result.RANK_CONNECTION_FAILED, Result.UPDATE_TOPOLOGY_FAILED,
               Result.TOO_FEW_PEERS)


def load_data():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.int64)
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


def state_hash(tensors):
    h = hashlib.sha256()
    for name, t in tensors.items():
        h.update(name.encode())
        h.update(t.detach().numpy().tobytes())
    return h.hexdigest()[:16]


def say(rank, msg):
    print(f"[peer {rank}] {msg}", flush=True)


def update_topology(comm):
    while True:
        try:
            comm.update_topology()
            return
        except PCCLError as e:
            if e.result is not Result.UPDATE_TOPOLOGY_FAILED:
                raise


def peer(args):
    rank = args.rank
    torch.manual_seed(0)  # the same initial model everywhere; the shared state would fix it anyway
    torch.set_num_threads(1)
    (x_train, y_train), (x_test, y_test) = load_data()
    model = MLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    # One step with zero gradients creates Adam's state tensors (and changes no parameter), so that
    # they exist before the shared state points at them.
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()

    shared = {}
    for name, p in model.named_parameters():
        shared[name] = p.data
        st = optimizer.state[p]
        shared[name + ".exp_avg"] = st["exp_avg"]
        shared[name + ".exp_avg_sq"] = st["exp_avg_sq"]
        shared[name + ".step"] = st["step"].reshape(1) if torch.is_tensor(st["step"]) else None
    shared = {k: v for k, v in shared.items() if v is not None}
    shared_state = pccl.SharedState([pccl.TensorInfo.from_torch(t, name) for name, t in shared.items()])

    comm = pccl.Communicator(args.master, peer_group=0)
    comm.connect(n_attempts=10)
    say(rank, f"admitted; {comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)} peers")
    while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < args.wait_for:
        update_topology(comm)  # vote the others in, so that the run starts with all of them
        time.sleep(0.01)
    rng = np.random.default_rng(1000 + rank)  # every peer draws its own batches
    params = list(model.parameters())
    first, synced_before = True, False
    while True:
        if not first:
            update_topology(comm)
        first = False
        world = comm.get_attribute(Attribute.LOCAL_WORLD_SIZE)
        if world < 2:  # a collective needs two peers: wait for company
            if shared_state.revision >= args.steps:
                break  # done; the others finished first and left before this last update
            synced_before = False
            time.sleep(0.05)
            continue
        if args.no_shared_state:  # everyone started together from the same seed
            info = pccl.SharedStateSyncInfo(0, 0)
        else:
            try:
                info = comm.sync_shared_state(shared_state)
            except PCCLError as e:
                if e.result not in RECOVERABLE:
                    raise
                say(rank, f"shared-state sync failed ({e.result.name}); next round")
                continue
        step = shared_state.revision
        if synced_before and info.rx_bytes != 0:
            raise SystemExit(f"[peer {rank}] step {step}: had to fetch {info.rx_bytes} B of shared state: "
                             "this peer's parameters diverged from the others'")
        if not synced_before and info.rx_bytes:
            say(rank, f"received the shared state at step {step} ({info.rx_bytes} B)")
        synced_before = True
        if step >= args.steps:
            break
        if args.leave_at and step >= args.leave_at:
            say(rank, f"leaving at step {step}")
            comm.close()
            return

        idx = torch.from_numpy(rng.choice(len(x_train), args.batch, replace=False))
        loss = torch.nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        grads = torch.cat([p.grad.reshape(-1) for p in params])
        try:
            info = comm.all_reduce(grads, grads, op=ReduceOp.AVG, tag=step)
        except PCCLError as e:
            if e.result not in RECOVERABLE:
                raise
            # Every member of the failed collective sees this failure: all drop the step alike.
            say(rank, f"step {step}: all-reduce failed ({e.result.name}); dropping the step")
            shared_state.revision = step + 1
            continue
        off = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(grads[off:off + n].view_as(p))
            off += n
        optimizer.step()
        shared_state.revision = step + 1
        if step % 10 == 0:
            say(rank, f"step {step} loss {loss.item():.4f} peers {info.local_world_size}")
        if args.step_delay:
            time.sleep(args.step_delay)

    with torch.no_grad():
        acc = (model(x_test).argmax(1) == y_test).float().mean().item()
    say(rank, f"final step {shared_state.revision} accuracy {acc:.4f} hash {state_hash(shared)}")
    comm.close()


# ---- the launcher ------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    address = f"127.0.0.1:{free_port()}"
    lines = queue.Queue()
    procs = {}

    def start(rank, *extra):
        cmd = [sys.executable, os.path.abspath(__file__), "--master", address, "--rank", str(rank),
               "--steps", str(args.steps), "--step-delay", str(args.step_delay), *extra]
        if args.no_shared_state:
            cmd.append("--no-shared-state")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
        procs[rank] = p

        def pump():
            for line in p.stdout:
                print(line, end="", flush=True)
                lines.put((rank, line))
        threading.Thread(target=pump, daemon=True).start()

    finals = {}
    with pccl.MasterNode(address) as master:
        master.run()
        print(f"master listening on {address}", flush=True)
        try:
            # Without shared state nobody can join mid-run: peer 3 starts with the others instead.
            first = "4" if args.no_shared_state else "3"
            start(0, "--wait-for", first)
            start(1, "--wait-for", first)
            start(2, "--wait-for", first, "--leave-at", str(args.leave_at))
            if args.no_shared_state:
                start(3, "--wait-for", first)
            killed, joined = False, args.no_shared_state
            deadline = time.monotonic() + args.timeout
            while any(p.poll() is None for p in procs.values()) or not lines.empty():
                if time.monotonic() > deadline:
                    raise SystemExit("launcher: timed out")
                try:
                    rank, line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                m = re.search(r"\] step (\d+) loss", line)
                if m:
                    step = int(m.group(1))
                    if not killed and step >= args.kill_at:
                        print(f"launcher: killing peer 1 (SIGKILL) at step {step}", flush=True)
                        os.killpg(procs[1].pid, signal.SIGKILL)
                        killed = True
                    if not joined and step >= args.join_at:
                        print(f"launcher: starting peer 3 at step {step}", flush=True)
                        start(3)
                        joined = True
                if "final step" in line:
                    parts = line.split()
                    finals[rank] = (float(parts[parts.index("accuracy") + 1]), parts[parts.index("hash") + 1])
        finally:
            for p in procs.values():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    codes = {r: p.returncode for r, p in procs.items()}
    print(f"launcher: exit codes {codes}; finals {finals}", flush=True)
    ok = (codes.get(0) == 0 and codes.get(2) == 0 and codes.get(3) == 0 and codes.get(1) == -signal.SIGKILL
          and set(finals) == {0, 3} and len({h for _, h in finals.values()}) == 1
          and all(acc >= args.min_accuracy for acc, _ in finals.values()))
    print("launcher: OK - peers 0 and 3 finished with bit-identical models" if ok else "launcher: FAILED",
          flush=True)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--master", help="master HOST:PORT: run one peer; without it, launch the whole demo")
    ap.add_argument("--rank", type=int, default=0, help="this peer's number (printouts, batch seed)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--step-delay", type=float, default=0.02, help="seconds of sleep per step (to watch churn)")
    ap.add_argument("--leave-at", type=int, default=0, help="leave the run at this step (0: never)")
    ap.add_argument("--wait-for", type=int, default=0, help="wait until this many peers are in before step 0")
    ap.add_argument("--kill-at", type=int, default=60, help="launcher: SIGKILL peer 1 at this step")
    ap.add_argument("--join-at", type=int, default=100, help="launcher: start peer 3 at this step")
    ap.add_argument("--no-shared-state", action="store_true",
                    help="skip sync_shared_state (for a libpccl without it): the run starts with all peers "
                         "from the same seed and nobody joins later (the launcher starts peer 3 with the others)")
    ap.add_argument("--min-accuracy", type=float, default=0.85, help="launcher: required test accuracy")
    ap.add_argument("--timeout", type=float, default=300, help="launcher: give up after this many seconds")
    args = ap.parse_args()
    needed = ["pcclAllReduce"] + ([] if args.no_shared_state else ["pcclSynchronizeSharedState"])
    missing = [s for s in needed if not pccl.is_exported(s)]
    if missing:
        raise SystemExit(f"this libpccl ({pccl.library_path()}) does not export {', '.join(missing)} yet; "
                         "this example needs it" + (" (or run it with --no-shared-state)"
                                                    if missing == ["pcclSynchronizeSharedState"] else ""))
    if args.master is None:
        if args.leave_at == 0:
            args.leave_at = 220 * args.steps // 300
        sys.exit(launch(args))
    peer(args)


if __name__ == "__main__":
    main()
