"""One peer process of test_diloco.py (not a test itself). Prints one JSON object per line.

usage: diloco_peer.py MASTER RANK --flavour numpy|torch --fragments F --delay D --compression C
                      --sync-every H --steps T [--wait-for N] [--kill-at S] [--step-sleep SEC] [--go-on-stdin]

Trains a toy model with pccl.diloco for T inner steps (the group's step counter, so a newcomer
stops where the others do) and prints the hash of the outer state after every step that finished
an outer step, then a final line. --kill-at S: from inner step S on, the next outer all-reduce
SIGKILLs this process while it runs (async: right after it started; blocking: 1 ms into it)."""
import argparse
import json
import os
import signal
import sys
import threading
import time

import numpy as np

import pccl
from pccl import Attribute, Result


def emit(**kw):
    print(json.dumps(kw), flush=True)


def vote_until(c, world):
    while c.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < world:
        try:
            c.update_topology()
        except pccl.PCCLError as e:
            if e.result is not Result.UPDATE_TOPOLOGY_FAILED:
                raise
        time.sleep(0.01)


SIZES = [300_000, 5_000, 120_000, 700, 90_000, 33]  # six tensors: four fragments of unequal sizes


def arm_kill(comm, at, get_step):
    """Wraps this communicator's all-reduce calls: from step `at` on, the next one is killed."""
    real_sync, real_async = comm.all_reduce, comm.all_reduce_async

    def die_soon():
        time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGKILL)

    def all_reduce(*a, **kw):
        if get_step() >= at:
            emit(event="dying", step=get_step())
            threading.Thread(target=die_soon, daemon=True).start()
        return real_sync(*a, **kw)

    def all_reduce_async(*a, **kw):
        h = real_async(*a, **kw)
        if get_step() >= at:
            emit(event="dying", step=get_step())
            os.kill(os.getpid(), signal.SIGKILL)
        return h

    comm.all_reduce, comm.all_reduce_async = all_reduce, all_reduce_async


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("master")
    ap.add_argument("rank", type=int)
    ap.add_argument("--flavour", default="numpy")
    ap.add_argument("--fragments", type=int, default=1)
    ap.add_argument("--delay", type=int, default=0)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--sync-every", type=int, default=8)
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--wait-for", type=int, default=0)
    ap.add_argument("--kill-at", type=int, default=0)
    ap.add_argument("--step-sleep", type=float, default=0.0)
    ap.add_argument("--switch-compression", default="", help="STEP:KIND: from that step on (when nothing is in "
                                                             "flight), another compression")
    ap.add_argument("--go-on-stdin", action="store_true", help="connect only once a line arrives on stdin")
    a = ap.parse_args()
    if a.flavour == "torch":
        import torch  # before waiting: a newcomer should arrive quickly once told to
    if a.go_on_stdin:
        emit(event="ready", rank=a.rank)
        sys.stdin.readline()
    comp = None if a.compression == "none" else a.compression
    comm = pccl.Communicator(a.master)
    comm.connect(n_attempts=5)
    emit(event="connected", rank=a.rank)
    vote_until(comm, a.wait_for)
    rng = np.random.default_rng(100 + a.rank)
    kw = dict(sync_every=a.sync_every, fragments=a.fragments, delay=a.delay, compression=comp)
    if a.flavour == "torch":
        import torch
        torch.set_num_threads(1)
        torch.manual_seed(a.rank)  # different initial weights: the first sync elects one set
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                    torch.nn.ReLU(), torch.nn.Linear(256, 10))
        inner = torch.optim.AdamW(model.parameters(), lr=1e-3)
        outer = torch.optim.SGD(model.parameters(), lr=0.7, momentum=0.9, nesterov=True)
        diloco = pccl.diloco.DiLoCo(model, outer, comm, **kw, join=False)
        x = torch.randn(256, 64, generator=torch.Generator().manual_seed(a.rank))
        y = torch.randint(0, 10, (256,), generator=torch.Generator().manual_seed(a.rank))

        def inner_step():
            loss = torch.nn.functional.cross_entropy(model(x), y)
            inner.zero_grad()
            loss.backward()
            inner.step()
    else:
        params = [rng.standard_normal(n).astype(np.float32) for n in SIZES]
        target = [np.full(n, a.rank, np.float32) for n in SIZES]
        diloco = pccl.diloco.NumpyDiLoCo(params, comm, **kw, join=False)

        def inner_step():
            for p, t in zip(params, target):
                p -= np.float32(0.1) * (p - t)
    if a.kill_at:
        arm_kill(comm, a.kill_at, lambda: diloco.inner_step)
    diloco.join()
    emit(event="joined", rank=a.rank, step=diloco.inner_step, hash=diloco.outer_hash())
    switch_at, _, switch_to = a.switch_compression.partition(":")
    while diloco.inner_step < a.steps:
        inner_step()
        done = diloco.step()
        if switch_at and diloco.inner_step >= int(switch_at):
            try:
                diloco.compression = None if switch_to == "none" else switch_to
                emit(event="switched", rank=a.rank, step=diloco.inner_step)
                switch_at = ""
            except ValueError:  # an all-reduce in flight: every peer tries again at the same next step
                pass
        if done:
            emit(event="outer", rank=a.rank, step=diloco.inner_step, hash=diloco.outer_hash(),
                 records=[[r.fragment, r.ok, r.world] for r in done])
        if a.step_sleep:
            time.sleep(a.step_sleep)
    diloco.finish()
    h = diloco.history
    emit(event="final", rank=a.rank, step=diloco.inner_step, hash=diloco.outer_hash(), joined_at=diloco.joined_at,
         diverged=diloco.diverged_fetches, topology_updates=diloco.topology_updates,
         ok=sum(1 for r in h if r.ok), dropped=sum(1 for r in h if not r.ok), tx=diloco.bytes_sent,
         torch_loaded="torch" in sys.modules)
    comm.close()


if __name__ == "__main__":
    import faulthandler
    import pccl.diloco  # noqa: F401
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for stacks before it gives up
    try:
        main()
    except pccl.PCCLError as e:
        emit(event="error", error=str(e), code=e.code)
        sys.exit(3)
