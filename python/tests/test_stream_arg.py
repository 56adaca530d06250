"""all_reduce(..., stream=...) argument checks, on an unconnected communicator (no GPU needed): a
stream that is neither a torch.cuda.Stream nor a non-negative int, and host buffers with a stream,
raise PCCLArgumentError before anything reaches the library; without stream= the call is the
blocking one (it fails here with the library's own error, not an argument error)."""
import numpy as np
import pytest

import pccl
from pccl import ReduceOp


@pytest.fixture
def comm():
    c = pccl.Communicator("127.0.0.1:48148")
    yield c
    c.close()


@pytest.mark.parametrize("stream", ["0", -1, 1.5, True, object()])
def test_bad_stream(comm, stream):
    a = np.zeros(4, dtype=np.float32)
    with pytest.raises(pccl.PCCLArgumentError):
        comm.all_reduce(a, a.copy(), op=ReduceOp.SUM, stream=stream)


def test_host_buffers_with_stream(comm):
    a = np.zeros(4, dtype=np.float32)
    with pytest.raises(pccl.PCCLArgumentError, match="CUDA tensors"):
        comm.all_reduce(a, a.copy(), op=ReduceOp.SUM, stream=0)


def test_without_stream_is_the_blocking_call(comm):
    a = np.zeros(4, dtype=np.float32)
    with pytest.raises(pccl.PCCLError) as e:
        comm.all_reduce(a, a.copy(), op=ReduceOp.SUM)
    assert not isinstance(e.value, pccl.PCCLArgumentError)
