"""sync_shared_state between in-process peers: the popular content wins, only what differs moves,
allow_content_inequality tensors are left alone, strategies. Skips while the library lacks
pcclSynchronizeSharedState."""
import numpy as np
import pytest
import torch

import pccl
from pccl import SharedStateSyncStrategy as S
from conftest import needs, run_threads

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def three(peers_factory):
    needs("pcclSynchronizeSharedState")
    return peers_factory(3).comms


def sync_all(comms, states, strategies=None):
    strategies = strategies or [S.ENFORCE_POPULAR] * len(comms)
    return run_threads([lambda c=c, s=s, st=st: c.sync_shared_state(s, strategy=st)
                        for c, s, st in zip(comms, states, strategies)])


def make(values, dtype=np.float32, n=1000, extra=None):
    arrays = [np.full(n, v, dtype) for v in values]
    states = []
    for a in arrays:
        infos = [pccl.TensorInfo.from_numpy(a, "w")]
        if extra is not None:
            infos.append(extra(a))
        states.append(pccl.SharedState(infos))
    return arrays, states


def test_popular_content_wins(three):
    arrays, states = make([1, 1, 2])
    infos = sync_all(three, states)
    assert all((a == 1).all() for a in arrays)
    assert infos[2].rx_bytes >= arrays[2].nbytes and infos[0].rx_bytes == infos[1].rx_bytes == 0
    assert sum(i.tx_bytes for i in infos) >= arrays[2].nbytes
    # next revision, nothing differs: nothing moves
    for s in states:
        s.revision += 1
    infos = sync_all(three, states)
    assert all(i.rx_bytes == 0 for i in infos)
    assert [s.revision for s in states] == [1, 1, 1]


def test_only_differing_tensors_move(three):
    ws = [np.arange(5000, dtype=np.float64) for _ in range(3)]
    bs = [np.full(10, 7, np.int32) for _ in range(3)]
    bs[1][3] = -1  # only peer 1's "b" differs
    states = [pccl.SharedState([pccl.TensorInfo.from_numpy(w, "w"), pccl.TensorInfo.from_numpy(b, "b")])
              for w, b in zip(ws, bs)]
    infos = sync_all(three, states)
    assert all((b == 7).all() for b in bs)
    assert 0 < infos[1].rx_bytes < ws[1].nbytes  # "b" fetched, "w" not


def test_allow_content_inequality_is_not_resent(three):
    scratch = [np.full(100, k, np.float32) for k in range(3)]
    arrays, states = make([5, 5, 5], extra=lambda a, it=iter(scratch): pccl.TensorInfo.from_numpy(
        next(it), "scratch", allow_content_inequality=True))
    infos = sync_all(three, states)
    assert [float(s[0]) for s in scratch] == [0.0, 1.0, 2.0]
    assert all(i.rx_bytes == 0 for i in infos)


def test_torch_tensors_and_bfloat16(three):
    ts = [torch.full((64,), float(v), dtype=torch.bfloat16) for v in (3, 3, 9)]
    ps = [torch.nn.Parameter(torch.full((4, 4), float(v))) for v in (1, 2, 1)]
    states = [pccl.SharedState([pccl.TensorInfo.from_torch(t, "t"), pccl.TensorInfo.from_torch(p, "p")])
              for t, p in zip(ts, ps)]
    sync_all(three, states)
    assert all(bool((t == 3).all()) for t in ts) and all(bool((p == 1).all()) for p in ps)


def test_receive_only_peer_receives(three):
    """RECEIVE_ONLY beside SEND_ONLY peers (beside ENFORCE_POPULAR ones it would be kicked, PCCL's rule)."""
    arrays, states = make([4, 4, 0])
    infos = sync_all(three, states, [S.SEND_ONLY, S.SEND_ONLY, S.RECEIVE_ONLY])
    assert (arrays[2] == 4).all() and infos[2].tx_bytes == 0


def test_send_only_peer_never_receives(three):
    arrays, states = make([6, 6, 6])
    infos = sync_all(three, states, [S.SEND_ONLY, S.SEND_ONLY, S.SEND_ONLY])
    assert infos[0].rx_bytes == 0 and all((a == 6).all() for a in arrays)


def test_newcomer_catches_up(peers_factory):
    needs("pcclSynchronizeSharedState")
    from conftest import admit
    p = peers_factory(2)
    a, b = p.comms
    arrays, states = make([1, 1])
    for rev in range(3):
        sync_all([a, b], states)
        for k in range(2):
            arrays[k] += 1
            states[k].revision += 1
    newcomer = pccl.Communicator(a.address)
    p.comms.append(newcomer)
    admit([a, b], [newcomer])
    late = np.zeros(1000, np.float32)
    late_state = pccl.SharedState([pccl.TensorInfo.from_numpy(late, "w")])
    sync_all([a, b, newcomer], [states[0], states[1], late_state])
    assert (late == arrays[0]).all() and late_state.revision == states[0].revision
