"""DiLoCo on scikit-learn's digits: each peer takes H local (inner) AdamW steps, then the peers
all-reduce their pseudo-gradients (outer weights - inner weights) and apply them with an outer
SGD-Nesterov step. Communication happens once per H steps instead of every step.

    /usr/bin/python3 examples/python/diloco.py              # master + 3 peers on 127.0.0.1
    /usr/bin/python3 examples/python/diloco.py --async      # async DiLoCo
    /usr/bin/python3 examples/python/diloco.py --kill-at 8  # SIGKILL peer 2 at outer step 8
    /usr/bin/python3 examples/python/diloco.py --no-shared-state   # a libpccl without shared state yet
    # one peer against a running master:
    /usr/bin/python3 examples/python/diloco.py --master 10.0.0.1:48148 --rank 0 [--async]

The outer weights and the outer optimizer's momentum are the shared state (revision = outer step):
a newcomer receives them with sync_shared_state(), and all peers hold them bit-identical (the
script asserts that a peer already in never has to fetch anything).

Synchronous DiLoCo, one round:
    update_topology; sync_shared_state; inner = outer; H inner steps;
    all_reduce(outer - inner, AVG); outer step.
Async DiLoCo (--async) overlaps the outer all-reduce with the next round's inner steps: the
pseudo-gradient of round t is reduced by all_reduce_async while round t+1's inner steps run, and
applied at the end of round t+1 (a one-round-delayed outer update). update_topology and
sync_shared_state run only when no all-reduce is in flight. A peer that just joined contributes a
zero pseudo-gradient to its first round. A late update and a strong Nesterov momentum overshoot
(outer lr 0.7 with momentum 0.9 ends near 0.5 test accuracy here), so async defaults to a gentler
outer optimizer: lr 0.3, momentum 0.5 (0.87 after 30 rounds; synchronous DiLoCo reaches 0.90).
A round whose all-reduce fails (a peer died) is dropped by every survivor alike.
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

RECOVERABLE = (Result.RANK_CONNECTION_LOST, Result.RANK_CONNECTION_FAILED, Result.UPDATE_TOPOLOGY_FAILED,
               Result.TOO_FEW_PEERS)


def load_data():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.int64)
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def flat(params):
    return torch.cat([p.detach().reshape(-1) for p in params])


def unflat_into(vec, tensors):
    off = 0
    for t in tensors:
        n = t.numel()
        t.copy_(vec[off:off + n].view_as(t))
        off += n


def say(rank, msg):
    print(f"[peer {rank}] {msg}", flush=True)


class Peer:
    def __init__(self, args):
        self.args = args
        self.rank = args.rank
        torch.manual_seed(0)
        torch.set_num_threads(1)
        (self.x, self.y), (self.x_test, self.y_test) = load_data()
        self.rng = np.random.default_rng(2000 + self.rank)
        self.outer = make_model()  # the shared weights
        self.inner = make_model()  # this peer's working copy
        self.inner.load_state_dict(self.outer.state_dict())
        self.inner_opt = torch.optim.AdamW(self.inner.parameters(), lr=args.inner_lr)
        self.outer_opt = torch.optim.SGD(self.outer.parameters(), lr=args.outer_lr,
                                         momentum=args.outer_momentum, nesterov=args.outer_momentum > 0)
        # A zero-gradient step creates the momentum buffers (and changes nothing) before the shared
        # state points at them.
        for p in self.outer.parameters():
            p.grad = torch.zeros_like(p)
        self.outer_opt.step()
        self.shared = {}
        for name, p in self.outer.named_parameters():
            self.shared[name] = p.data
            self.shared[name + ".momentum"] = self.outer_opt.state[p]["momentum_buffer"]
        self.state = pccl.SharedState([pccl.TensorInfo.from_torch(t, n) for n, t in self.shared.items()])
        self.comm = pccl.Communicator(args.master)
        self.comm.connect(n_attempts=10)
        say(self.rank, f"admitted; {self.comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)} peers")
        while self.comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < args.wait_for:
            self.update_topology()  # vote the others in, so that everyone starts at round 0
            time.sleep(0.01)
        self.synced_before = False

    def update_topology(self):
        while True:
            try:
                self.comm.update_topology()
                return
            except PCCLError as e:
                if e.result is not Result.UPDATE_TOPOLOGY_FAILED:
                    raise

    def sync(self):
        """update_topology is the caller's; returns False when the round cannot run (too few
        peers, or the sync failed). A peer whose rounds are all done gets True even alone: a peer
        that finished first may leave before this one's last update_topology."""
        if self.comm.get_attribute(Attribute.LOCAL_WORLD_SIZE) < 2:
            if self.state.revision >= self.args.outer_steps:
                return True  # done, and the others finished first: nobody to wait for
            self.synced_before = False
            time.sleep(0.05)
            return False
        if self.args.no_shared_state:  # everyone started together from the same seed
            return True
        try:
            info = self.comm.sync_shared_state(self.state)
        except PCCLError as e:
            if e.result not in RECOVERABLE:
                raise
            say(self.rank, f"shared-state sync failed ({e.result.name})")
            return False
        if self.synced_before and info.rx_bytes:
            raise SystemExit(f"[peer {self.rank}] outer step {self.state.revision}: fetched {info.rx_bytes} B of "
                             "shared state: this peer's outer weights diverged from the others'")
        if not self.synced_before and info.rx_bytes:
            say(self.rank, f"received the shared state at outer step {self.state.revision}")
        self.synced_before = True
        return True

    def inner_steps(self):
        loss = None
        for _ in range(self.args.inner_steps):
            idx = torch.from_numpy(self.rng.choice(len(self.x), self.args.batch, replace=False))
            loss = torch.nn.functional.cross_entropy(self.inner(self.x[idx]), self.y[idx])
            self.inner_opt.zero_grad()
            loss.backward()
            self.inner_opt.step()
            if self.args.step_delay:
                time.sleep(self.args.step_delay)
        return loss

    def outer_step(self, avg_delta):
        params = list(self.outer.parameters())
        unflat_into(avg_delta, [p.grad for p in params])
        self.outer_opt.step()

    def reset_inner(self):
        with torch.no_grad():
            for pi, po in zip(self.inner.parameters(), self.outer.parameters()):
                pi.copy_(po)

    def run_sync(self):
        first = True
        while True:
            if not first:
                self.update_topology()
            first = False
            if not self.sync():
                continue
            t = self.state.revision
            if t >= self.args.outer_steps:
                return
            self.reset_inner()
            loss = self.inner_steps()
            delta = flat(self.outer.parameters()) - flat(self.inner.parameters())
            try:
                info = self.comm.all_reduce(delta, delta, op=ReduceOp.AVG, tag=t)
            except PCCLError as e:
                if e.result not in RECOVERABLE:
                    raise
                say(self.rank, f"outer step {t}: all-reduce failed ({e.result.name}); round dropped")
                self.state.revision = t + 1
                continue
            self.outer_step(delta)
            self.state.revision = t + 1
            say(self.rank, f"outer step {t} inner loss {loss.item():.4f} peers {info.local_world_size}")

    def run_async(self):
        first = True
        pending = None  # (handle, delta, outer step) of the all-reduce in flight
        start = flat(self.outer.parameters())
        while True:
            loss = self.inner_steps() if not first else None  # overlaps with `pending`
            if pending is not None:
                handle, delta, t_prev = pending
                pending = None
                ok, status, info = handle.wait()
                if ok:
                    self.outer_step(delta)
                    say(self.rank, f"outer step {t_prev} applied (reduced with {info.local_world_size} peers)"
                                   + (f"; inner loss {loss.item():.4f}" if loss is not None else ""))
                else:  # every member of the failed all-reduce sees it: all drop it alike
                    say(self.rank, f"outer step {t_prev}: all-reduce failed ({Result(status).name}); dropped")
            while True:  # nothing is in flight now
                if not first:
                    self.update_topology()
                first = False
                if self.sync():
                    break
                start = flat(self.outer.parameters())  # no round can run: start over from the outer weights
                self.reset_inner()
            t = self.state.revision
            if t >= self.args.outer_steps:
                return
            delta = start - flat(self.inner.parameters())
            if self.synced_before and not torch.isfinite(delta).all():
                raise SystemExit("non-finite pseudo-gradient")
            handle = self.comm.all_reduce_async(delta, delta, op=ReduceOp.AVG, tag=t)
            pending = (handle, delta, t)
            self.reset_inner()
            start = flat(self.outer.parameters())
            self.state.revision = t + 1

    def finish(self):
        with torch.no_grad():
            acc = (self.outer(self.x_test).argmax(1) == self.y_test).float().mean().item()
        h = hashlib.sha256()
        for name, t in self.shared.items():
            h.update(name.encode())
            h.update(t.numpy().tobytes())
        say(self.rank, f"final outer step {self.state.revision} accuracy {acc:.4f} hash {h.hexdigest()[:16]}")
        self.comm.close()


# ---- the launcher ------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    address = f"127.0.0.1:{free_port()}"
    lines = queue.Queue()
    procs = {}
    finals = {}
    extra = ["--async"] if args.use_async else []
    with pccl.MasterNode(address) as master:
        master.run()
        print(f"master listening on {address}; {'async' if args.use_async else 'synchronous'} DiLoCo",
              flush=True)
        try:
            for r in range(args.peers):
                cmd = [sys.executable, os.path.abspath(__file__), "--master", address, "--rank", str(r),
                       "--outer-steps", str(args.outer_steps), "--inner-steps", str(args.inner_steps),
                       "--step-delay", str(args.step_delay), "--wait-for", str(args.peers),
                       "--inner-lr", str(args.inner_lr), "--outer-lr", str(args.outer_lr),
                       "--outer-momentum", str(args.outer_momentum), "--batch", str(args.batch),
                       *extra]
                if args.no_shared_state:
                    cmd.append("--no-shared-state")
                p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
                procs[r] = p

                def pump(r=r, p=p):
                    for line in p.stdout:
                        print(line, end="", flush=True)
                        lines.put((r, line))
                threading.Thread(target=pump, daemon=True).start()
            victim = args.peers - 1
            killed = False
            deadline = time.monotonic() + args.timeout
            while any(p.poll() is None for p in procs.values()) or not lines.empty():
                if time.monotonic() > deadline:
                    raise SystemExit("launcher: timed out")
                try:
                    r, line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                m = re.search(r"outer step (\d+)", line)
                if args.kill_at and not killed and m:
                    step = int(m.group(1))
                    if step >= args.kill_at:
                        print(f"launcher: killing peer {victim} (SIGKILL) at outer step {step}", flush=True)
                        os.killpg(procs[victim].pid, signal.SIGKILL)
                        killed = True
                if "final outer step" in line:
                    parts = line.split()
                    finals[r] = (float(parts[parts.index("accuracy") + 1]), parts[parts.index("hash") + 1])
        finally:
            for p in procs.values():
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    codes = {r: p.returncode for r, p in procs.items()}
    survivors = {r for r in procs if not (args.kill_at and r == args.peers - 1)}
    print(f"launcher: exit codes {codes}; finals {finals}", flush=True)
    ok = (all(codes[r] == 0 for r in survivors) and set(finals) == survivors
          and len({h for _, h in finals.values()}) == 1
          and all(acc >= args.min_accuracy for acc, _ in finals.values()))
    print("launcher: OK - every peer holds the same outer model" if ok else "launcher: FAILED", flush=True)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--master", help="master HOST:PORT: run one peer; without it, launch the whole demo")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--async", dest="use_async", action="store_true", help="async DiLoCo (overlapped outer step)")
    ap.add_argument("--peers", type=int, default=3, help="launcher: number of peers")
    ap.add_argument("--outer-steps", type=int, default=30)
    ap.add_argument("--inner-steps", type=int, default=10, help="H: local steps per outer step")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--inner-lr", type=float, default=3e-3)
    ap.add_argument("--outer-lr", type=float, default=None,
                    help="outer SGD learning rate (default 0.7; async: 0.3, its update is one round late)")
    ap.add_argument("--outer-momentum", type=float, default=None,
                    help="outer Nesterov momentum (default 0.9; async: 0.5)")
    ap.add_argument("--step-delay", type=float, default=0.0, help="seconds of sleep per inner step")
    ap.add_argument("--wait-for", type=int, default=0, help="peer: wait until this many peers are in before round 0")
    ap.add_argument("--kill-at", type=int, default=0, help="launcher: SIGKILL the last peer at this outer step")
    ap.add_argument("--no-shared-state", action="store_true",
                    help="skip sync_shared_state (for a libpccl without it): the peers must all start together "
                         "(the launcher makes them wait for each other) and nobody may join later")
    ap.add_argument("--min-accuracy", type=float, default=0.85, help="launcher: required test accuracy")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    if args.outer_lr is None:
        args.outer_lr = 0.3 if args.use_async else 0.7
    if args.outer_momentum is None:
        args.outer_momentum = 0.5 if args.use_async else 0.9
    needed = ["pcclAllReduce"] + ([] if args.no_shared_state else ["pcclSynchronizeSharedState"])
    if args.use_async:
        needed += ["pcclAllReduceAsync", "pcclAwaitAsyncReduce"]
    missing = [s for s in needed if not pccl.is_exported(s)]
    if missing:
        raise SystemExit(f"this libpccl ({pccl.library_path()}) does not export {', '.join(missing)} yet; "
                         "this example needs it" + (" (or run it with --no-shared-state)"
                                                    if missing == ["pcclSynchronizeSharedState"] else ""))
    if args.master is None:
        sys.exit(launch(args))
    peer = Peer(args)
    peer.run_async() if args.use_async else peer.run_sync()
    peer.finish()


if __name__ == "__main__":
    main()
