"""Shared fixtures. Every test is bounded in time: a watchdog dumps all threads' stacks and ends the
process when a test overruns (a blocked foreign call cannot be interrupted any other way), and every
subprocess wait has a timeout."""
import faulthandler
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

TESTS = Path(os.path.abspath(__file__)).parent  # no resolve(): stay inside a runfiles tree
PYTHON_DIR = TESTS.parent
REPO = PYTHON_DIR.parent

# The package under test is the one beside these tests, not an installed copy.
sys.path.insert(0, str(PYTHON_DIR))

import pccl  # noqa: E402

DEFAULT_TEST_TIMEOUT_S = 90


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): per-test watchdog (default 90 s)")


@pytest.fixture(autouse=True)
def _watchdog(request):
    m = request.node.get_closest_marker("timeout")
    seconds = m.args[0] if m else DEFAULT_TEST_TIMEOUT_S
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def needs(*symbols):
    """Skips the calling test while the loaded libpccl.so lacks one of `symbols`."""
    for s in symbols:
        if not pccl.is_exported(s):
            pytest.skip(f"libpccl does not export {s} yet")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def master():
    """An in-process MasterNode on a free 127.0.0.1 port; yields its "127.0.0.1:PORT"."""
    last = None
    for _ in range(20):
        port = free_port()
        try:
            m = pccl.MasterNode(f"127.0.0.1:{port}")
            break
        except pccl.PCCLError as e:  # the port was taken between the probe and the bind
            last = e
    else:
        raise last
    m.run()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        m.close()


def master_binary():
    env = os.environ.get("PCCL_MASTER_BINARY")
    if env:
        return env
    p = REPO / "build" / "bin" / "pccl-master"
    return str(p) if p.is_file() else None


class MasterProcess:
    """The pccl-master binary on 127.0.0.1, port chosen by the kernel."""

    def __init__(self, timeout=20):
        binary = master_binary()
        if binary is None:
            pytest.skip("no pccl-master binary (set PCCL_MASTER_BINARY or run `make build`)")
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--log-level", "warn"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        line = read_line(self.proc.stdout, timeout)
        if not line or "listening on" not in line:
            self.close()
            raise RuntimeError(f"pccl-master did not start: {line!r}")
        self.address = line.strip().rsplit(" ", 1)[1]
        # Keep draining its output so that it never blocks on a full pipe.
        self.output = []
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self):
        for line in self.proc.stdout:
            self.output.append(line)

    def close(self):
        kill_group(self.proc)


def read_line(stream, timeout):
    """One line from a pipe, or None after `timeout` seconds."""
    out = []
    t = threading.Thread(target=lambda: out.append(stream.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return out[0] if out else None


def kill_group(proc, sig=signal.SIGKILL):
    """Kills the process group that start_new_session=True made, then reaps the process."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def peer_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_DIR) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("PCCL_LIBRARY", pccl.library_path())
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_threads(fns, timeout=30):
    """Runs each callable on its own thread (collectives need every peer at once); returns their
    results, re-raising the first exception. Threads still running after `timeout` fail the test."""
    results = [None] * len(fns)
    errors = [None] * len(fns)

    def run(i, f):
        try:
            results[i] = f()
        except BaseException as e:  # noqa: B902 - handed to the test thread
            errors[i] = e

    threads = [threading.Thread(target=run, args=(i, f), daemon=True) for i, f in enumerate(fns)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [i for i, t in enumerate(threads) if t.is_alive()]
    if stuck:
        pytest.fail(f"threads {stuck} still blocked after {timeout} s")
    for e in errors:
        if e is not None:
            raise e
    return results


def admit(accepted, newcomers, timeout=30):
    """Connects each communicator of `newcomers` (on threads: pcclConnect blocks until admitted)
    while the `accepted` ones vote in rounds of update_topology until all newcomers are in. A round
    admits only peers that registered before it, hence the loop."""
    results = {}

    def connect(c):
        try:
            c.connect(n_attempts=1)
            results[id(c)] = None
        except BaseException as e:  # noqa: B902 - handed to the test thread
            results[id(c)] = e

    threads = [threading.Thread(target=connect, args=(c,), daemon=True) for c in newcomers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    while any(t.is_alive() for t in threads):
        if time.monotonic() > deadline:
            pytest.fail(f"newcomers not admitted within {timeout} s")
        if accepted:
            run_threads([a.update_topology for a in accepted], timeout=max(1.0, deadline - time.monotonic()))
        for t in threads:
            t.join(0.05)
    for c in newcomers:
        if results.get(id(c)) is not None:
            raise results[id(c)]


class Peers:
    """n in-process communicators on one master, connected and admitted one by one."""

    def __init__(self, address, n, peer_groups=None):
        self.comms = []
        groups = peer_groups or [0] * n
        try:
            for i in range(n):
                c = pccl.Communicator(address, peer_group=groups[i])
                self.comms.append(c)
                admit(self.comms[:-1], [c])
        except BaseException:
            self.close()
            raise

    def close(self):
        for c in self.comms:
            try:
                c.close()
            except pccl.PCCLError:  # a thread still blocked in it (the test already failed)
                pass


@pytest.fixture
def peers_factory(master):
    made = []

    def make(n, peer_groups=None):
        p = Peers(master, n, peer_groups)
        made.append(p)
        return p

    try:
        yield make
    finally:
        for p in made:
            p.close()
