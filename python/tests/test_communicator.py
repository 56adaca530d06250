"""Communicator: construction, connect failures, calls in the wrong state, close, and the missing
symbols of an older library."""
import time

import numpy as np
import pytest

import pccl
from pccl import Attribute, Result
from conftest import free_port, needs


def expect(code, fn):
    with pytest.raises(pccl.PCCLError) as ei:
        fn()
    assert ei.value.result is code, str(ei.value)
    return ei.value


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.1:", ":48148", "127.0.0.1:x", "127.0.0.1:0",
                                     "127.0.0.1:65536", "1.2.3.4.5:1", 48148, None])
def test_bad_address(address):
    e = expect(Result.INVALID_ARGUMENT, lambda: pccl.Communicator(address))
    assert isinstance(e, pccl.PCCLArgumentError)


@pytest.mark.parametrize("kw", [{"peer_group": -1}, {"peer_group": 1 << 32}, {"peer_group": "0"},
                                {"p2p_connection_pool_size": -1}])
def test_bad_params(kw):
    expect(Result.INVALID_ARGUMENT, lambda: pccl.Communicator("127.0.0.1:48148", **kw))


@pytest.mark.parametrize("address", ["127.0.0.1:48148", "[::1]:48148", "::1:48148", "localhost:5", "10.0.0.1:1"])
def test_good_addresses(address):
    with pccl.Communicator(address, peer_group=3, p2p_connection_pool_size=2) as c:
        assert c.address == address and c.peer_group == 3 and not c.closed
        assert "Communicator(" in repr(c)
    assert c.closed and "closed" in repr(c)


def test_address_encoding():
    c = pccl.Communicator("[::1]:1234")
    a = c._params.master_address
    assert a.inet.protocol == 1 and list(a.inet.ipv6.data) == [0] * 15 + [1] and a.port == 1234
    c.close()
    c = pccl.Communicator("192.168.7.9:48148", peer_group=5, p2p_connection_pool_size=4)
    p = c._params
    assert p.master_address.inet.protocol == 0 and list(p.master_address.inet.ipv4.data) == [192, 168, 7, 9]
    assert (p.master_address.port, p.peer_group, p.p2p_connection_pool_size) == (48148, 5, 4)
    c.close()


@pytest.mark.timeout(30)
def test_connect_unreachable_master_fails_in_bounded_time(monkeypatch):
    monkeypatch.setenv("PCCL_CONNECT_TIMEOUT_MS", "300")
    port = free_port()  # nobody listens there
    with pccl.Communicator(f"127.0.0.1:{port}") as c:
        t0 = time.monotonic()
        e = expect(Result.MASTER_CONNECTION_FAILED, lambda: c.connect(n_attempts=1))
        assert time.monotonic() - t0 < 5
        assert e.code == 6 and e.func_name == "pcclConnect"


@pytest.mark.timeout(30)
def test_connect_retries_then_raises_last_error(monkeypatch):
    monkeypatch.setenv("PCCL_CONNECT_TIMEOUT_MS", "200")
    with pccl.Communicator(f"127.0.0.1:{free_port()}") as c:
        t0 = time.monotonic()
        expect(Result.MASTER_CONNECTION_FAILED, lambda: c.connect(n_attempts=2))
        took = time.monotonic() - t0
        assert 1.0 <= took < 8, took  # one second between attempts, as in PCCL's package
        assert not c.closed  # a fresh C communicator replaced the failed one


@pytest.mark.timeout(30)
def test_connect_succeeds_on_a_later_attempt(monkeypatch):
    """The master comes up while connect() retries: the retry uses a fresh C communicator."""
    import threading
    monkeypatch.setenv("PCCL_CONNECT_TIMEOUT_MS", "200")
    port = free_port()
    masters = []

    def start_later():
        time.sleep(0.6)
        m = pccl.MasterNode(f"127.0.0.1:{port}")
        m.run()
        masters.append(m)

    t = threading.Thread(target=start_later)
    t.start()
    try:
        with pccl.Communicator(f"127.0.0.1:{port}") as c:
            c.connect(n_attempts=5)
            assert c.get_attribute(Attribute.GLOBAL_WORLD_SIZE) == 1
    finally:
        t.join(10)
        for m in masters:
            m.close()


def test_connect_bad_attempts():
    with pccl.Communicator("127.0.0.1:48148") as c:
        expect(Result.INVALID_ARGUMENT, lambda: c.connect(n_attempts=0))
        expect(Result.INVALID_ARGUMENT, lambda: c.connect(n_attempts="5"))


def test_calls_before_connect_are_invalid_usage():
    with pccl.Communicator("127.0.0.1:48148") as c:
        expect(Result.INVALID_USAGE, c.update_topology)
        expect(Result.INVALID_USAGE, c.are_peers_pending)
        for a in Attribute:
            expect(Result.INVALID_USAGE, lambda: c.get_attribute(a))


BEFORE_CONNECT = {
    "pcclAllReduce": lambda c, a: c.all_reduce(a, a, op=pccl.ReduceOp.SUM),
    "pcclAllReduceAsync": lambda c, a: c.all_reduce_async(a, a, op=pccl.ReduceOp.SUM),
    "pcclAllReduceMultipleWithRetry": lambda c, a: c.all_reduce_multiple_with_retry([pccl.ReduceOpDescriptor.from_numpy(
        a, a, pccl.ReduceDescriptor(4, pccl.ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(pccl.DataType.FLOAT)))]),
    "pcclOptimizeTopology": lambda c, a: c.optimize_topology(),
    "pcclSynchronizeSharedState": lambda c, a: c.sync_shared_state(
        pccl.SharedState([pccl.TensorInfo.from_numpy(a, "a")])),
}


@pytest.mark.parametrize("symbol", sorted(BEFORE_CONNECT))
def test_collectives_before_connect_are_invalid_usage(symbol):
    needs(symbol)
    a = np.ones(4, np.float32)
    with pccl.Communicator("127.0.0.1:48148") as c:
        expect(Result.INVALID_USAGE, lambda: BEFORE_CONNECT[symbol](c, a))


def test_get_attribute_bad_attribute():
    with pccl.Communicator("127.0.0.1:48148") as c:
        expect(Result.INVALID_ARGUMENT, lambda: c.get_attribute(0))
        expect(Result.INVALID_ARGUMENT, lambda: c.get_attribute("GLOBAL_WORLD_SIZE"))


def test_use_after_close_is_invalid_usage():
    c = pccl.Communicator("127.0.0.1:48148")
    c.close()
    c.close()  # idempotent
    a = np.ones(4, np.float32)
    for f in (c.connect, c.update_topology, c.are_peers_pending, c.optimize_topology,
              lambda: c.get_attribute(Attribute.GLOBAL_WORLD_SIZE),
              lambda: c.all_reduce(a, a, op=pccl.ReduceOp.SUM),
              lambda: c.all_reduce_async(a, a, op=pccl.ReduceOp.SUM),
              lambda: c.sync_shared_state(pccl.SharedState([pccl.TensorInfo.from_numpy(a, "a")]))):
        e = expect(Result.INVALID_USAGE, f)
        assert "closed" in str(e)


SYMBOL_CALLS = {
    "pcclOptimizeTopology": lambda c, a: c.optimize_topology(),
    "pcclAllReduce": lambda c, a: c.all_reduce(a, a, op=pccl.ReduceOp.SUM),
    "pcclAllReduceAsync": lambda c, a: c.all_reduce_async(a, a, op=pccl.ReduceOp.SUM),
    "pcclAllReduceMultipleWithRetry": lambda c, a: c.all_reduce_multiple_with_retry([]),
    "pcclSynchronizeSharedState": lambda c, a: c.sync_shared_state(
        pccl.SharedState([pccl.TensorInfo.from_numpy(a, "a")])),
}


@pytest.mark.parametrize("symbol", sorted(SYMBOL_CALLS))
def test_missing_symbol_gives_clear_error(symbol):
    """While the library lacks a function, its method raises PCCLNotExportedError naming it; once
    the library has it, the method reaches it (any other outcome)."""
    a = np.ones(4, np.float32)
    with pccl.Communicator("127.0.0.1:48148") as c:
        if pccl.is_exported(symbol):
            try:
                SYMBOL_CALLS[symbol](c, a)
            except pccl.PCCLNotExportedError:
                pytest.fail(f"{symbol} is exported but the call did not find it")
            except pccl.PCCLError:
                pass
        else:
            with pytest.raises(pccl.PCCLNotExportedError) as ei:
                SYMBOL_CALLS[symbol](c, a)
            assert ei.value.symbol == symbol and symbol in str(ei.value)
            assert ei.value.result is Result.INTERNAL_ERROR


@pytest.mark.timeout(60)
def test_connect_twice_is_invalid_usage(master):
    with pccl.Communicator(master) as c:
        c.connect(n_attempts=1)
        expect(Result.INVALID_USAGE, lambda: c.connect(n_attempts=3))


@pytest.mark.timeout(60)
def test_single_peer(master):
    with pccl.Communicator(master) as c:
        c.connect()
        assert [c.get_attribute(a) for a in Attribute] == [1, 1, 1, 1]
        assert c.get_attribute(2) == 1  # plain ints are accepted too
        c.update_topology()  # alone: nobody to admit, returns at once
        assert c.are_peers_pending() is False


@pytest.mark.timeout(60)
def test_master_gone_gives_master_connection_failed(monkeypatch):
    port = free_port()
    m = pccl.MasterNode(f"127.0.0.1:{port}")
    m.run()
    c = pccl.Communicator(f"127.0.0.1:{port}")
    try:
        c.connect(n_attempts=1)
        m.interrupt()
        m.await_termination()
        deadline = time.monotonic() + 20
        while True:  # the link thread notices the closed socket soon after
            try:
                c.update_topology()
            except pccl.PCCLError as e:
                assert e.result is Result.MASTER_CONNECTION_FAILED, str(e)
                break
            assert time.monotonic() < deadline, "update_topology kept succeeding without a master"
            time.sleep(0.05)
        expect(Result.MASTER_CONNECTION_FAILED, c.are_peers_pending)
    finally:
        c.close()
        m.close()
