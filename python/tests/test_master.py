"""MasterNode: lifecycle, misuse, bind failures."""
import socket
import threading
import time

import pytest

import pccl
from pccl import Result
from conftest import free_port


def expect(code, fn):
    with pytest.raises(pccl.PCCLError) as ei:
        fn()
    assert ei.value.result is code, str(ei.value)
    return ei.value


def test_lifecycle():
    port = free_port()
    m = pccl.MasterNode(f"127.0.0.1:{port}")
    assert not m.closed and repr(m) == f"MasterNode('127.0.0.1:{port}')"
    m.run()
    # it accepts TCP connections now
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    m.interrupt()
    m.await_termination()
    m.await_termination()  # again: already stopped
    m.close()
    m.close()
    assert m.closed and "closed" in repr(m)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_close_stops_a_running_master():
    port = free_port()
    with pccl.MasterNode(f"127.0.0.1:{port}") as m:
        m.run()
    assert m.closed


def test_close_without_run():
    m = pccl.MasterNode(f"127.0.0.1:{free_port()}")
    m.close()
    assert m.closed


def test_run_twice_is_invalid_usage():
    with pccl.MasterNode(f"127.0.0.1:{free_port()}") as m:
        m.run()
        expect(Result.INVALID_USAGE, m.run)


def test_interrupt_before_run_is_invalid_usage():
    with pccl.MasterNode(f"127.0.0.1:{free_port()}") as m:
        expect(Result.INVALID_USAGE, m.interrupt)
        expect(Result.INVALID_USAGE, m.await_termination)


def test_calls_after_close_are_invalid_usage():
    m = pccl.MasterNode(f"127.0.0.1:{free_port()}")
    m.close()
    for f in (m.run, m.interrupt, m.await_termination):
        e = expect(Result.INVALID_USAGE, f)
        assert "closed" in str(e)


def test_port_in_use_is_invalid_argument():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        e = expect(Result.INVALID_ARGUMENT, lambda: pccl.MasterNode(f"127.0.0.1:{port}"))
        assert e.func_name == "pcclCreateMaster"


@pytest.mark.parametrize("address", ["0.0.0.0", "0.0.0.0:70000", "x:1", 5])
def test_bad_listen_address(address):
    expect(Result.INVALID_ARGUMENT, lambda: pccl.MasterNode(address))


def test_ipv6_and_any_address():
    with pccl.MasterNode("[::1]:0") as m:  # port 0: the kernel picks one
        m.run()
    with pccl.MasterNode("0.0.0.0:0") as m:
        m.run()


@pytest.mark.timeout(30)
def test_await_termination_releases_the_gil():
    """await_termination blocks in C; another thread interrupts the master meanwhile."""
    m = pccl.MasterNode(f"127.0.0.1:{free_port()}")
    m.run()
    ticks = []

    def interrupter():
        for _ in range(20):
            ticks.append(time.monotonic())
            time.sleep(0.01)
        m.interrupt()

    t = threading.Thread(target=interrupter)
    t.start()
    m.await_termination()
    t.join(10)
    assert len(ticks) == 20
    m.close()


def test_close_while_awaiting_in_another_thread_is_refused():
    m = pccl.MasterNode(f"127.0.0.1:{free_port()}")
    m.run()
    t = threading.Thread(target=m.await_termination)
    t.start()
    time.sleep(0.2)
    try:
        expect(Result.INVALID_USAGE, m.close)
    finally:
        # interrupt has its own _use and may run beside the waiting call
        m.interrupt()
        t.join(10)
    m.close()
    assert m.closed


@pytest.mark.timeout(60)
def test_python_m_pccl_master():
    """python3 -m pccl.master serves peers and stops cleanly on SIGTERM."""
    import signal
    import subprocess
    import sys

    from conftest import kill_group, peer_env
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "pccl.master", "--listen-address", f"127.0.0.1:{port}"],
                         env=peer_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        with pccl.Communicator(f"127.0.0.1:{port}") as c:
            c.connect(n_attempts=10)
            assert c.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 1
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        assert p.returncode == 0, out
        assert "shutting down" in out
    finally:
        kill_group(p)


@pytest.mark.timeout(60)
def test_dropped_running_master_keeps_serving(tmp_path):
    """PCCL's rule, which its master scripts rely on (run() is their last line): dropping a running
    MasterNode does not stop it; the process serves peers until it is killed."""
    import subprocess, sys
    port = free_port()
    script = tmp_path / "master.py"
    script.write_text(
        "import pccl\n"
        "def main():\n"
        f"    master = pccl.MasterNode('127.0.0.1:{port}')\n"
        "    master.run()\n"
        "    print('returned', flush=True)\n"
        "main()\n")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "returned"
        with pccl.Communicator(f"127.0.0.1:{port}") as c:
            c.connect(n_attempts=20)
            assert c.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 1
        assert p.poll() is None  # still serving
    finally:
        p.kill()
        p.wait()
