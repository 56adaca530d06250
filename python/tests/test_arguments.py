"""Argument checks: every bad buffer or value raises PCCLArgumentError (code INVALID_ARGUMENT) with a
clear message before anything reaches the library. They run on an unconnected communicator: the
checks come first."""
import numpy as np
import pytest
import torch

import pccl
from pccl import DataType, ReduceOp


@pytest.fixture
def comm():
    c = pccl.Communicator("127.0.0.1:48148")
    yield c
    c.close()


def reduce_calls(comm):
    """Every method that takes a (send, recv) pair."""
    def multiple(send, recv, **kw):
        d = pccl.ReduceDescriptor(int(send.size if isinstance(send, np.ndarray) else send.numel()), ReduceOp.SUM, 0,
                                  pccl.ReduceOperandDescriptor(DataType.FLOAT))
        maker = pccl.ReduceOpDescriptor.from_numpy if isinstance(send, np.ndarray) else pccl.ReduceOpDescriptor.from_torch
        return comm.all_reduce_multiple_with_retry([maker(send, recv, d)])
    return {
        "all_reduce": lambda s, r, **kw: comm.all_reduce(s, r, op=kw.pop("op", ReduceOp.SUM), **kw),
        "all_reduce_async": lambda s, r, **kw: comm.all_reduce_async(s, r, op=kw.pop("op", ReduceOp.SUM), **kw),
        "multiple": multiple,
    }


CALLS = ["all_reduce", "all_reduce_async", "multiple"]


def expect_arg_error(fn, match):
    with pytest.raises(pccl.PCCLArgumentError, match=match) as ei:
        fn()
    e = ei.value
    assert e.result is pccl.Result.INVALID_ARGUMENT and e.code == 3 and isinstance(e, pccl.PCCLError)
    return e


def f32(n=8):
    return np.zeros(n, np.float32)


def t32(n=8):
    return torch.zeros(n, dtype=torch.float32)


@pytest.mark.parametrize("call", CALLS)
class TestPairChecks:
    def test_numpy_non_contiguous_send(self, comm, call):
        a = np.zeros((4, 4), np.float32)
        expect_arg_error(lambda: reduce_calls(comm)[call](a[:, 0], f32(4)), "send is not C-contiguous")

    def test_numpy_non_contiguous_recv(self, comm, call):
        a = np.zeros(16, np.float32)
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(8), a[::2]), "recv is not C-contiguous")

    def test_numpy_fortran_order(self, comm, call):
        a = np.asfortranarray(np.zeros((3, 4), np.float32))
        expect_arg_error(lambda: reduce_calls(comm)[call](a, np.zeros((3, 4), np.float32)), "not C-contiguous")

    def test_torch_non_contiguous(self, comm, call):
        t = torch.zeros(4, 4).t()
        expect_arg_error(lambda: reduce_calls(comm)[call](t, torch.zeros(4, 4)), "send is not contiguous")
        expect_arg_error(lambda: reduce_calls(comm)[call](torch.zeros(4, 4), t), "recv is not contiguous")

    def test_size_mismatch_numpy(self, comm, call):
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(8), f32(9)), "8 elements and recv 9.*same size")

    def test_size_mismatch_torch(self, comm, call):
        expect_arg_error(lambda: reduce_calls(comm)[call](t32(8), t32(7)), "same size")

    def test_dtype_mismatch(self, comm, call):
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(8), np.zeros(8, np.float64)), "dtype")
        expect_arg_error(lambda: reduce_calls(comm)[call](t32(8), torch.zeros(8, dtype=torch.float64)), "dtype")

    def test_mixed_numpy_torch(self, comm, call):
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(8), t32(8)), "numpy buffer and recv a torch")

    def test_read_only_recv(self, comm, call):
        r = f32(8)
        r.setflags(write=False)
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(8), r), "recv is read-only")

    def test_partial_overlap(self, comm, call):
        a = f32(16)
        expect_arg_error(lambda: reduce_calls(comm)[call](a[0:8], a[4:12]), "overlap partially")
        t = t32(16)
        expect_arg_error(lambda: reduce_calls(comm)[call](t[0:8], t[4:12]), "overlap partially")

    def test_unsupported_dtype(self, comm, call):
        b = np.zeros(8, np.bool_)
        expect_arg_error(lambda: reduce_calls(comm)[call](b, b.copy()), "send: unsupported numpy dtype bool")
        c = torch.zeros(8, dtype=torch.complex64)
        expect_arg_error(lambda: reduce_calls(comm)[call](c, c.clone()), "unsupported torch dtype")

    def test_non_native_byte_order(self, comm, call):
        a = np.zeros(8, ">f4")
        expect_arg_error(lambda: reduce_calls(comm)[call](a, a.copy()), "byte order")


@pytest.mark.parametrize("call", ["all_reduce", "all_reduce_async"])
class TestReduceArgs:
    def test_not_a_buffer(self, comm, call):
        expect_arg_error(lambda: reduce_calls(comm)[call]([1.0, 2.0], f32(2)), "numpy.ndarray or a torch.Tensor, not list")
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(2), memoryview(bytearray(8))), "not memoryview")

    def test_bad_op(self, comm, call):
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(), f32(), op="sum"), "op must be a pccl.ReduceOp")
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(), f32(), op=17), "op must be a pccl.ReduceOp")

    @pytest.mark.parametrize("tag", [-1, 1 << 64, 1.5, None])
    def test_bad_tag(self, comm, call, tag):
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(), f32(), tag=tag), "tag must be an integer")

    def test_operand_descriptor_dtype_mismatch(self, comm, call):
        od = pccl.ReduceOperandDescriptor(DataType.DOUBLE)
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(), f32(), operand_descriptor=od),
                         "datatype DOUBLE does not match the buffers' FLOAT")

    def test_bad_quantization_options(self, comm, call):
        expect_arg_error(lambda: reduce_calls(comm)[call](f32(), f32(), quantization_options="minmax"),
                         "quantization_options must be QuantizationOptions")

    def test_torch_meta_device(self, comm, call):
        m = torch.empty(8, device="meta")
        expect_arg_error(lambda: reduce_calls(comm)[call](m, torch.empty(8, device="meta")),
                         "only cpu and cuda tensors")

    def test_torch_sparse(self, comm, call):
        s = torch.zeros(8).to_sparse()
        expect_arg_error(lambda: reduce_calls(comm)[call](s, t32()), "only dense")

    def test_cuda_without_cuda_support(self, comm, call):
        if pccl.build_info()["has_cuda_support"]:
            pytest.skip("this libpccl has CUDA support")
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device to make a CUDA tensor")
        c = torch.zeros(8, device="cuda")
        expect_arg_error(lambda: reduce_calls(comm)[call](c, c), "built without CUDA")


def test_multiple_with_retry_checks(comm):
    d = pccl.ReduceDescriptor(8, ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(DataType.FLOAT))
    op = pccl.ReduceOpDescriptor.from_numpy(f32(), f32(), d)
    expect_arg_error(lambda: comm.all_reduce_multiple_with_retry([op, op]), "share a tag")
    expect_arg_error(lambda: comm.all_reduce_multiple_with_retry([op], max_in_flight=0), "max_in_flight")
    expect_arg_error(lambda: comm.all_reduce_multiple_with_retry(["x"]), "ReduceOpDescriptor objects")


def test_reduce_op_descriptor_count_and_dtype_checks():
    d = pccl.ReduceDescriptor(9, ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(DataType.FLOAT))
    expect_arg_error(lambda: pccl.ReduceOpDescriptor.from_numpy(f32(8), f32(8), d), "count 9 exceeds")
    d2 = pccl.ReduceDescriptor(8, ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(DataType.INT32))
    expect_arg_error(lambda: pccl.ReduceOpDescriptor.from_torch(t32(8), t32(8), d2), "datatype INT32 does not match")
    expect_arg_error(lambda: pccl.ReduceOpDescriptor.from_torch(t32(8), t32(8), "d"), "ReduceDescriptor")
    # a prefix is fine
    d3 = pccl.ReduceDescriptor(4, ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(DataType.FLOAT))
    assert pccl.ReduceOpDescriptor.from_numpy(f32(8), f32(8), d3).reduce_descriptor.count == 4


def test_descriptor_value_checks():
    od = pccl.ReduceOperandDescriptor(DataType.FLOAT)
    expect_arg_error(lambda: pccl.ReduceDescriptor(-1, ReduceOp.SUM, 0, od), "count")
    expect_arg_error(lambda: pccl.ReduceDescriptor(1, "SUM", 0, od), "op")
    expect_arg_error(lambda: pccl.ReduceDescriptor(1, ReduceOp.SUM, -3, od), "tag")
    expect_arg_error(lambda: pccl.ReduceDescriptor(1, ReduceOp.SUM, 0, DataType.FLOAT), "operand_descriptor")
    expect_arg_error(lambda: pccl.ReduceOperandDescriptor("float"), "datatype")
    expect_arg_error(lambda: pccl.ReduceOperandDescriptor(DataType.FLOAT, "normal"), "distribution_hint")
    expect_arg_error(lambda: pccl.QuantizationOptions(DataType.UINT8, "minmax"), "algorithm")
    expect_arg_error(lambda: pccl.QuantizationOptions(99), "quantized_datatype")
    expect_arg_error(lambda: pccl.ReduceOpDescriptor(0, 0, "d"), "ReduceDescriptor")


class TestTensorInfo:
    def test_non_contiguous(self):
        expect_arg_error(lambda: pccl.TensorInfo.from_numpy(np.zeros((4, 4))[:, 1], "a"), "not C-contiguous")
        expect_arg_error(lambda: pccl.TensorInfo.from_torch(torch.zeros(4, 4).t(), "t"), "not contiguous")

    def test_empty(self):
        expect_arg_error(lambda: pccl.TensorInfo.from_numpy(np.zeros(0), "a"), "empty")
        expect_arg_error(lambda: pccl.TensorInfo.from_torch(torch.zeros(0), "t"), "empty")

    def test_read_only(self):
        a = np.zeros(4)
        a.setflags(write=False)
        expect_arg_error(lambda: pccl.TensorInfo.from_numpy(a, "a"), "read-only")

    def test_unsupported_dtype(self):
        expect_arg_error(lambda: pccl.TensorInfo.from_numpy(np.zeros(4, bool), "a"), "unsupported numpy dtype")
        expect_arg_error(lambda: pccl.TensorInfo.from_torch(torch.zeros(4, dtype=torch.bool), "t"),
                         "unsupported torch dtype")

    def test_not_a_tensor(self):
        expect_arg_error(lambda: pccl.TensorInfo.from_numpy([1, 2], "a"), "numpy.ndarray or a torch.Tensor")

    @pytest.mark.parametrize("name", ["", None, "a\0b", 3])
    def test_bad_name(self, name):
        expect_arg_error(lambda: pccl.TensorInfo.from_numpy(np.zeros(4), name), "name")

    def test_raw_pointer(self):
        expect_arg_error(lambda: pccl.TensorInfo("x", 0, numel=1, dtype=DataType.FLOAT,
                                                 device_type=pccl.DeviceType.CPU, allow_content_inequality=False),
                         "invalid data pointer")
        a = np.zeros(3, np.int16)
        i = pccl.TensorInfo("x", a.ctypes.data, numel=3, dtype=DataType.INT16, device_type=pccl.DeviceType.CPU,
                            allow_content_inequality=True)
        assert (i.name, i.numel, i.dtype, i.allow_content_inequality) == ("x", 3, DataType.INT16, True)
        expect_arg_error(lambda: pccl.TensorInfo("x", 8, numel=-1, dtype=DataType.FLOAT), "numel")
        expect_arg_error(lambda: pccl.TensorInfo("x", 8, numel=1, dtype="f"), "dtype")

    def test_keeps_array_alive(self):
        import gc
        import weakref
        t = torch.arange(5, dtype=torch.float32)
        ref = weakref.ref(t)
        info = pccl.TensorInfo.from_torch(t, "t", allow_content_inequality=True)
        del t
        gc.collect()
        assert ref() is not None and info.allow_content_inequality
        del info
        gc.collect()
        assert ref() is None

    def test_parameter(self):
        p = torch.nn.Parameter(torch.ones(3, 2))
        info = pccl.TensorInfo.from_torch(p, "w")
        assert info.data_ptr == p.data_ptr() and info.numel == 6


class TestSharedState:
    def test_revision(self):
        a = np.arange(4, dtype=np.float32)
        s = pccl.SharedState([pccl.TensorInfo.from_numpy(a, "a")])
        assert s.revision == 0
        s.revision = 41
        s.push_revision()
        assert s.revision == 42
        s.revision += 1
        assert s.revision == 43
        expect_arg_error(lambda: setattr(s, "revision", -1), "revision")
        expect_arg_error(lambda: setattr(s, "revision", 1 << 64), "revision")

    def test_c_view(self):
        a = np.arange(4, dtype=np.float32)
        t = torch.zeros(3, dtype=torch.bfloat16)
        s = pccl.SharedState([pccl.TensorInfo.from_numpy(a, "a"),
                              pccl.TensorInfo.from_torch(t, "b", allow_content_inequality=True)])
        c = s._state
        assert c.count == 2
        assert [c.infos[i].name for i in range(2)] == [b"a", b"b"]
        assert (c.infos[0].data, c.infos[0].count, c.infos[0].datatype) == (a.ctypes.data, 4, DataType.FLOAT.value)
        assert (c.infos[1].data, c.infos[1].count, c.infos[1].datatype) == (t.data_ptr(), 3, DataType.BFLOAT16.value)
        assert (c.infos[0].allow_content_inequality, c.infos[1].allow_content_inequality) == (False, True)
        assert [i.name for i in s.tensor_infos] == ["a", "b"]

    def test_empty(self):
        expect_arg_error(lambda: pccl.SharedState([]), "at least one")

    def test_duplicate_names(self):
        a = np.zeros(2)
        expect_arg_error(lambda: pccl.SharedState([pccl.TensorInfo.from_numpy(a, "x"),
                                                   pccl.TensorInfo.from_numpy(a.copy(), "x")]), "unique")

    def test_wrong_type(self):
        expect_arg_error(lambda: pccl.SharedState([np.zeros(2)]), "TensorInfo objects")

    def test_sync_wrong_args(self, comm):
        s = pccl.SharedState([pccl.TensorInfo.from_numpy(np.zeros(2), "x")])
        expect_arg_error(lambda: comm.sync_shared_state([np.zeros(2)]), "must be a SharedState")
        expect_arg_error(lambda: comm.sync_shared_state(s, strategy="popular"), "strategy")


def test_descriptor_to_c():
    d = pccl.ReduceDescriptor(10, ReduceOp.MAX, 7, pccl.ReduceOperandDescriptor(DataType.INT16,
                                                                                pccl.DistributionHint.NORMAL),
                              pccl.QuantizationOptions(DataType.UINT8, pccl.QuantizationAlgorithm.ZERO_POINT_SCALE))
    c = d.to_c()
    assert (c.count, c.op, c.tag) == (10, 3, 7)
    assert (c.src_descriptor.datatype, c.src_descriptor.distribution_hint) == (2, 1)
    assert (c.quantization_options.quantized_datatype, c.quantization_options.algorithm) == (0, 2)
    # no quantization options: the operands travel as they are
    c2 = pccl.ReduceDescriptor(1, ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(DataType.DOUBLE)).to_c()
    assert (c2.quantization_options.quantized_datatype, c2.quantization_options.algorithm) == (11, 0)
    # PCCL's defaults
    q = pccl.QuantizationOptions()
    assert (q.quantized_datatype, q.algorithm) == (DataType.UINT8, pccl.QuantizationAlgorithm.MIN_MAX)
    assert pccl.ReduceOperandDescriptor(DataType.FLOAT).distribution_hint is pccl.DistributionHint.NONE


def test_reduce_op_descriptor_to_c():
    s, r = f32(8), f32(8)
    d = pccl.ReduceDescriptor(8, ReduceOp.AVG, 3, pccl.ReduceOperandDescriptor(DataType.FLOAT))
    op = pccl.ReduceOpDescriptor.from_numpy(s, r, d)
    c = op.to_c()
    assert (c.sendbuf, c.recvbuf, c.descriptor.count, c.descriptor.op, c.descriptor.tag) == (
        s.ctypes.data, r.ctypes.data, 8, 1, 3)
    t = t32(8)
    op2 = pccl.ReduceOpDescriptor.from_torch(t, t, d)  # in place
    assert op2.sendbuf_ptr == op2.recvbuf_ptr == t.data_ptr()


def test_numpy_integer_scalars_accepted():
    d = pccl.ReduceDescriptor(np.int64(4), ReduceOp.SUM, np.uint32(2), pccl.ReduceOperandDescriptor(DataType.FLOAT))
    assert (d.count, d.tag) == (4, 2) and type(d.count) is int
    with pytest.raises(pccl.PCCLArgumentError):
        pccl.ReduceDescriptor(True, ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(DataType.FLOAT))


def test_result_value_classes():
    a, b = pccl.ReduceInfo(3, 10, 20), pccl.ReduceInfo(3, 10, 20)
    assert a == b and a != pccl.ReduceInfo(2, 10, 20) and a.world_size == 3
    assert repr(a) == "ReduceInfo(local_world_size=3, tx_bytes=10, rx_bytes=20)"
    s = pccl.SharedStateSyncInfo(1, 2)
    assert s == pccl.SharedStateSyncInfo(1, 2) and s != pccl.SharedStateSyncInfo(2, 1)
    assert repr(s) == "SharedStateSyncInfo(tx_bytes=1, rx_bytes=2)"


def test_async_handle_bookkeeping():
    """The Python side of AsyncReduceHandle, without the C function: a dropped handle leaves its
    buffers with the communicator until close(); wait() after close() reports a failure."""
    import gc
    import weakref
    from pccl import _native
    c = pccl.Communicator("127.0.0.1:48148")
    buf = np.ones(4, np.float32)
    ref = weakref.ref(buf)
    h = pccl.AsyncReduceHandle(c, _native.AsyncReduceOpC(0, 7), (buf, buf))
    assert h.tag == 7
    del buf, h
    gc.collect()
    assert ref() is not None and len(c._orphans) == 1  # the library might still use the memory
    h2 = pccl.AsyncReduceHandle(c, _native.AsyncReduceOpC(0, 8), (np.zeros(2), np.zeros(2)))
    c.close()
    assert c._orphans == []
    gc.collect()
    assert ref() is None
    ok, status, info = h2.wait()
    assert not ok and status is pccl.Result.INVALID_USAGE and info == pccl.ReduceInfo(0, 0, 0)
    assert h2.wait() == (ok, status, info)
