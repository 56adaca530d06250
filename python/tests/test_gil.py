"""Blocking calls release the GIL: another Python thread keeps running while one waits in C."""
import threading
import time

import numpy as np
import pytest

import pccl
from conftest import admit, free_port, needs

pytestmark = pytest.mark.timeout(90)


class Ticker:
    """Counts pure-Python loop iterations on a background thread."""

    def __init__(self):
        self.count = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.count += 1
            time.sleep(0.001)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(5)


def test_connect_to_unreachable_master_releases_gil(monkeypatch):
    monkeypatch.setenv("PCCL_CONNECT_TIMEOUT_MS", "1000")
    with pccl.Communicator(f"127.0.0.1:{free_port()}") as c, Ticker() as t:
        t0, n0 = time.monotonic(), t.count
        with pytest.raises(pccl.PCCLError) as ei:
            c.connect(n_attempts=1)
        took, n = time.monotonic() - t0, t.count - n0
    assert ei.value.result is pccl.Result.MASTER_CONNECTION_FAILED
    assert took >= 0.9
    # ~1 ms per tick: were the GIL held by the blocked call, the ticker could not tick at all.
    assert n >= 20, f"only {n} ticks in {took:.2f} s"


def test_connect_waiting_for_admission_releases_gil(master):
    """The main thread runs Python (and then votes) while another thread sits in pcclConnect."""
    with pccl.Communicator(master) as a, pccl.Communicator(master) as b:
        a.connect(n_attempts=1)
        t = threading.Thread(target=b.connect, kwargs={"n_attempts": 1})
        t.start()
        try:
            spins = 0
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.5:
                spins += 1
            assert t.is_alive() and spins > 1000
            a.update_topology()
        finally:
            t.join(30)
        assert b.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 2


def test_update_topology_releases_gil(master):
    """update_topology blocks until every accepted peer calls it; a ticker runs meanwhile."""
    with pccl.Communicator(master) as a, pccl.Communicator(master) as b:
        admit([], [a])
        admit([a], [b])
        done = threading.Event()

        def late_b():
            time.sleep(0.5)
            b.update_topology()
            done.set()

        with Ticker() as t:
            other = threading.Thread(target=late_b)
            other.start()
            t0, n0 = time.monotonic(), t.count
            a.update_topology()
            took, n = time.monotonic() - t0, t.count - n0
            other.join(30)
        assert done.is_set() and took >= 0.4 and n >= 20, (took, n)


def test_all_reduce_releases_gil(master):
    needs("pcclAllReduce")
    with pccl.Communicator(master) as a, pccl.Communicator(master) as b:
        admit([], [a])
        admit([a], [b])
        x = np.ones(1 << 16, np.float32)
        y = np.full(1 << 16, 2, np.float32)
        out_a, out_b = np.empty_like(x), np.empty_like(y)

        def late_b():
            time.sleep(0.5)
            b.all_reduce(y, out_b, op=pccl.ReduceOp.SUM)

        with Ticker() as t:
            other = threading.Thread(target=late_b)
            other.start()
            t0, n0 = time.monotonic(), t.count
            a.all_reduce(x, out_a, op=pccl.ReduceOp.SUM)
            took, n = time.monotonic() - t0, t.count - n0
            other.join(30)
        assert took >= 0.4 and n >= 20, (took, n)
        assert (out_a == 3).all() and (out_b == 3).all()
