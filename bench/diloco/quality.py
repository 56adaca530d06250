"""Training quality and bytes moved: DiLoCo (pccl.diloco) against all-reduce-every-step DDP over
libpccl, on two tasks, with a real master and one process per peer on 127.0.0.1.

    PYTHONPATH=python /usr/bin/python3 bench/diloco/quality.py --task digits --method ddp
    PYTHONPATH=python /usr/bin/python3 bench/diloco/quality.py --task digits --method diloco --H 50 \
        [--fragments 4 --delay 1] [--compression uint8]
    PYTHONPATH=python /usr/bin/python3 bench/diloco/quality.py --table      # every row of docs/diloco.md

Tasks: "digits" (scikit-learn's 8x8 digits, MLP 64-128-128-10, 1500 train / 297 test images, each
peer a third of the training set) and "text" (a character-level MLP language model, context 16, 32-dim embedding, two hidden layers of 128,
on the license texts of Debian's base-files package, /usr/share/common-licenses; the last 10 %
of the text is the test set). Every peer runs the same number of inner steps (AdamW); DiLoCo's
outer optimizer is SGD(lr 0.7, momentum 0.9, Nesterov). Prints one JSON line per run: the final
test accuracy and loss of the outer model (DDP: the model), and the bytes peer 0 sent in
all-reduces (total, and the most in one sync)."""
import argparse
import glob
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- tasks -------------------------------------------------------------------------------------

def digits_task(rank, world):
    import torch
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.int64)
    xtr, ytr = x[:1500][rank::world], y[:1500][rank::world]
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    return model, (xtr, ytr), (x[1500:], y[1500:]), 32, 3e-3


def text_task(rank, world, context=16):
    import torch
    files = sorted(glob.glob("/usr/share/common-licenses/*"))
    text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in files if os.path.isfile(f))
    chars = sorted(set(text))
    ids = torch.tensor([chars.index(c) for c in text], dtype=torch.int64)
    cut = int(len(ids) * 0.9)
    vocab = len(chars)

    def windows(seq):
        idx = torch.arange(len(seq) - context)
        return torch.stack([seq[idx + k] for k in range(context)], 1), seq[idx + context]

    xtr, ytr = windows(ids[:cut])
    xte, yte = windows(ids[cut:])
    xtr, ytr = xtr[rank::world], ytr[rank::world]
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, 32), torch.nn.Flatten(),
                                torch.nn.Linear(32 * context, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, vocab))
    return model, (xtr, ytr), (xte[:20000], yte[:20000]), 64, 2e-3


TASKS = {"digits": digits_task, "text": text_task}


def evaluate(model, test):
    import torch
    with torch.no_grad():
        out = model(test[0])
        loss = torch.nn.functional.cross_entropy(out, test[1]).item()
        acc = (out.argmax(1) == test[1]).float().mean().item()
    return acc, loss


# ---- one peer ----------------------------------------------------------------------------------

def peer(a):
    import torch
    import pccl
    import pccl.diloco
    from pccl import Attribute, ReduceOp
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, (xtr, ytr), test, batch, lr = TASKS[a.task](a.rank, a.peers)
    inner = torch.optim.AdamW(model.parameters(), lr=lr)
    comm = pccl.Communicator(a.master)
    comm.connect(n_attempts=10)
    while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < a.peers:
        comm.update_topology()
        time.sleep(0.01)
    rng = np.random.default_rng(1000 + a.rank)
    params = list(model.parameters())
    t0 = time.monotonic()
    if a.method == "ddp":
        n = sum(p.numel() for p in params)
        flat = torch.zeros(n)
        tx, peak, syncs = 0, 0, 0
        for step in range(a.steps):
            idx = torch.from_numpy(rng.choice(len(xtr), batch, replace=False))
            loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            inner.zero_grad()
            loss.backward()
            torch.cat([p.grad.reshape(-1) for p in params], out=flat)
            info = comm.all_reduce(flat, flat, op=ReduceOp.AVG, tag=step)
            off = 0
            for p in params:
                p.grad.copy_(flat[off:off + p.numel()].view_as(p))
                off += p.numel()
            inner.step()
            tx, peak, syncs = tx + info.tx_bytes, max(peak, info.tx_bytes), syncs + 1
        acc, tloss = evaluate(model, test)
    else:
        outer = torch.optim.SGD(model.parameters(), lr=a.outer_lr, momentum=0.9, nesterov=True)
        diloco = pccl.diloco.DiLoCo(model, outer, comm, sync_every=a.H, fragments=a.fragments, delay=a.delay,
                                    compression=None if a.compression == "none" else a.compression)
        while diloco.inner_step < a.steps:
            idx = torch.from_numpy(rng.choice(len(xtr), batch, replace=False))
            loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            inner.zero_grad()
            loss.backward()
            inner.step()
            diloco.step()
        diloco.finish()
        with torch.no_grad():
            for p, o in zip(params, diloco.outer_tensors()):
                p.copy_(o)
        acc, tloss = evaluate(model, test)
        h = [r for r in diloco.history if r.ok]
        tx, peak, syncs = diloco.bytes_sent, max((r.tx_bytes for r in h), default=0), len(h)
    print(json.dumps({"rank": a.rank, "acc": acc, "loss": tloss, "tx": tx, "peak": peak, "syncs": syncs,
                      "params": sum(p.numel() for p in params), "seconds": time.monotonic() - t0}), flush=True)
    comm.close()


# ---- the launcher ------------------------------------------------------------------------------

def launch(a):
    binary = os.environ.get("PCCL_MASTER_BINARY") or os.path.join(os.path.dirname(__file__), "..", "..", "build",
                                                                   "bin", "pccl-master")
    port = free_port()
    m = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}", "--log-level", "error"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(0.3)
        args = ["--task", a.task, "--method", a.method, "--H", a.H, "--fragments", a.fragments, "--delay", a.delay,
                "--compression", a.compression, "--steps", a.steps, "--peers", a.peers, "--outer-lr", a.outer_lr]
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--master", f"127.0.0.1:{port}",
                                   "--rank", str(r), *map(str, args)], stdout=subprocess.PIPE, text=True)
                 for r in range(a.peers)]
        outs = [json.loads(p.communicate(timeout=1800)[0].strip().splitlines()[-1]) for p in procs]
    finally:
        m.kill()
        m.wait()
    r0 = outs[0]
    row = {"task": a.task, "method": a.method, "H": a.H if a.method == "diloco" else 1, "fragments": a.fragments,
           "delay": a.delay, "compression": a.compression, "steps": a.steps, "peers": a.peers,
           "acc": round(r0["acc"], 4), "loss": round(r0["loss"], 4),
           "tx_MB": round(r0["tx"] / 1e6, 3), "peak_sync_kB": round(r0["peak"] / 1e3, 1), "syncs": r0["syncs"],
           "params": r0["params"], "seconds": round(max(o["seconds"] for o in outs), 1),
           "same_model": len({(o["acc"], o["loss"]) for o in outs}) == 1}
    print(json.dumps(row), flush=True)
    return row


TABLE = [  # (task, method, H, fragments, delay, compression)
    *[(t, "ddp", 1, 1, 0, "none") for t in ("digits", "text")],
    *[(t, "diloco", h, 1, 0, "none") for t in ("digits", "text") for h in (10, 50, 100)],
    *[(t, "diloco", 100, 4, 1, "none") for t in ("digits", "text")],
    *[(t, "diloco", 50, 1, 0, c) for t in ("digits", "text") for c in ("uint8", "uint8+noef", "bf16")],
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--master")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--task", default="digits", choices=sorted(TASKS))
    ap.add_argument("--method", default="diloco", choices=["ddp", "diloco"])
    ap.add_argument("--H", type=int, default=50)
    ap.add_argument("--fragments", type=int, default=1)
    ap.add_argument("--delay", type=int, default=0)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--steps", type=int, default=0, help="inner steps (default: digits 500, text 600)")
    ap.add_argument("--peers", type=int, default=3)
    ap.add_argument("--outer-lr", type=float, default=0.7)
    ap.add_argument("--table", action="store_true", help="run every configuration of docs/diloco.md's table")
    a = ap.parse_args()
    if a.master:
        return peer(a)
    if a.table:
        for task, method, h, f, d, c in TABLE:
            a.task, a.method, a.H, a.fragments, a.delay, a.compression = task, method, h, f, d, c
            a.steps = 0
            a.steps = {"digits": 500, "text": 600}[task]
            launch(a)
        return
    if not a.steps:
        a.steps = {"digits": 500, "text": 600}[a.task]
    launch(a)


if __name__ == "__main__":
    main()
