"""Several in-process communicators on one master: admission, world sizes, peer groups, pending
votes, and collectives that do not match."""
import threading
import time

import pytest

import pccl
from pccl import Attribute, Result
from conftest import run_threads

pytestmark = pytest.mark.timeout(120)


def attrs(c):
    return [c.get_attribute(a) for a in (Attribute.GLOBAL_WORLD_SIZE, Attribute.LOCAL_WORLD_SIZE,
                                         Attribute.NUM_DISTINCT_PEER_GROUPS, Attribute.LARGEST_PEER_GROUP_WORLD_SIZE)]


def test_three_peers_join_one_by_one(peers_factory):
    p = peers_factory(3)
    for c in p.comms:
        assert attrs(c) == [3, 3, 1, 3]


def test_newcomer_waits_for_the_vote(master):
    with pccl.Communicator(master) as a, pccl.Communicator(master) as b:
        a.connect(n_attempts=1)
        t = threading.Thread(target=b.connect, kwargs={"n_attempts": 1})
        t.start()
        try:
            time.sleep(0.5)
            assert t.is_alive(), "the newcomer was admitted without a vote"
            deadline = time.monotonic() + 20
            while not a.are_peers_pending():  # it registers with the master soon after starting
                assert time.monotonic() < deadline, "the newcomer never showed up as pending"
                time.sleep(0.05)
            assert t.is_alive()
            assert a.get_attribute(Attribute.GLOBAL_WORLD_SIZE) == 1
            a.update_topology()
        finally:
            t.join(30)
        assert not t.is_alive()
        assert attrs(a) == attrs(b) == [2, 2, 1, 2]
        assert run_threads([a.are_peers_pending, b.are_peers_pending]) == [False, False]


def test_peer_groups(peers_factory):
    p = peers_factory(3, peer_groups=[0, 1, 1])
    a, b, c = p.comms
    assert attrs(a) == [3, 1, 2, 2]
    assert attrs(b) == attrs(c) == [3, 2, 2, 2]


def test_update_topology_after_a_peer_left(peers_factory):
    p = peers_factory(3)
    a, b, c = p.comms
    c.close()
    # The master notices the closed connection; the survivors' next rounds see two peers.
    deadline = time.monotonic() + 20
    while True:
        try:
            run_threads([a.update_topology, b.update_topology])
        except pccl.PCCLError as e:
            assert e.result is Result.UPDATE_TOPOLOGY_FAILED, str(e)
        if a.get_attribute(Attribute.GLOBAL_WORLD_SIZE) == 2:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert attrs(a) == attrs(b) == [2, 2, 1, 2]


def test_pending_vote_meets_an_update(peers_factory):
    """One peer asks for a topology round while the other asks whether one is due: it is told
    "pending", and its own pcclUpdateTopology completes the round for both."""
    p = peers_factory(2)
    a, b = p.comms
    pending = []

    def ask_then_update():
        pending.append(b.are_peers_pending())
        b.update_topology()

    run_threads([a.update_topology, ask_then_update])
    assert pending == [True]
    assert attrs(a) == attrs(b) == [2, 2, 1, 2]
