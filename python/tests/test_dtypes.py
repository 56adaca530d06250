"""dtype mapping for numpy (11 types: no bfloat16) and torch (12; uint16/32/64 need torch >= 2.3)."""
import numpy as np
import pytest
import torch

import pccl
from pccl import DataType

NUMPY = {DataType.UINT8: np.uint8, DataType.INT8: np.int8, DataType.INT16: np.int16, DataType.UINT16: np.uint16,
         DataType.UINT32: np.uint32, DataType.INT32: np.int32, DataType.UINT64: np.uint64, DataType.INT64: np.int64,
         DataType.FLOAT16: np.float16, DataType.FLOAT: np.float32, DataType.DOUBLE: np.float64}
TORCH_NAMES = {DataType.UINT8: "uint8", DataType.INT8: "int8", DataType.INT16: "int16", DataType.UINT16: "uint16",
               DataType.UINT32: "uint32", DataType.INT32: "int32", DataType.UINT64: "uint64", DataType.INT64: "int64",
               DataType.FLOAT16: "float16", DataType.BFLOAT16: "bfloat16", DataType.FLOAT: "float32",
               DataType.DOUBLE: "float64"}


def torch_dtype(dt):
    """The torch dtype of a DataType, or skip when this torch lacks it."""
    t = getattr(torch, TORCH_NAMES[dt], None)
    if not isinstance(t, torch.dtype):
        pytest.skip(f"torch {torch.__version__} has no torch.{TORCH_NAMES[dt]}")
    return t


@pytest.mark.parametrize("dt", list(NUMPY), ids=lambda d: d.name)
def test_numpy_round_trip(dt):
    assert DataType.from_numpy_dtype(np.dtype(NUMPY[dt])) is dt
    assert DataType.from_numpy_dtype(NUMPY[dt]) is dt
    assert dt.to_numpy_dtype() == np.dtype(NUMPY[dt])
    assert dt.itemsize == np.dtype(NUMPY[dt]).itemsize


def test_numpy_platform_aliases():
    # C long / long long / intc name the same widths on the platforms numpy supports.
    for t in (np.intc, np.int_, np.longlong, np.uintc, np.uint, np.ulonglong, np.single, np.double, np.half):
        assert DataType.from_numpy_dtype(t).itemsize == np.dtype(t).itemsize


def test_numpy_has_no_bfloat16():
    with pytest.raises(pccl.PCCLArgumentError, match="numpy has no dtype for BFLOAT16"):
        DataType.BFLOAT16.to_numpy_dtype()


@pytest.mark.parametrize("bad", [np.bool_, np.complex64, np.complex128, np.object_, np.longdouble, "U4", "S3",
                                 "datetime64[s]", [("a", np.int32)]], ids=str)
def test_numpy_unsupported(bad):
    with pytest.raises(pccl.PCCLArgumentError, match="unsupported numpy dtype") as ei:
        DataType.from_numpy_dtype(bad)
    assert isinstance(ei.value, ValueError) and ei.value.result is pccl.Result.INVALID_ARGUMENT


def test_numpy_non_native_byte_order():
    with pytest.raises(pccl.PCCLArgumentError, match="byte order"):
        DataType.from_numpy_dtype(np.dtype(np.float32).newbyteorder())
    # single bytes have no byte order
    assert DataType.from_numpy_dtype(np.dtype(">u1")) is DataType.UINT8


@pytest.mark.parametrize("dt", list(DataType), ids=lambda d: d.name)
def test_torch_round_trip(dt):
    t = torch_dtype(dt)
    assert DataType.from_torch_dtype(t) is dt
    assert dt.to_torch_dtype() is t
    assert dt.itemsize == torch.empty(0, dtype=t).element_size()


@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64"])
def test_torch_missing_unsigned_types_raise(name):
    if isinstance(getattr(torch, name, None), torch.dtype):
        pytest.skip(f"torch {torch.__version__} has torch.{name}")
    with pytest.raises(pccl.PCCLArgumentError, match=f"has no {name}"):
        DataType[name.upper()].to_torch_dtype()


@pytest.mark.parametrize("bad", [torch.bool, torch.complex64, torch.complex128, torch.qint8], ids=str)
def test_torch_unsupported(bad):
    with pytest.raises(pccl.PCCLArgumentError, match="unsupported torch dtype") as ei:
        DataType.from_torch_dtype(bad)
    assert isinstance(ei.value, ValueError)


def test_torch_bfloat16_tensor_is_accepted():
    t = torch.zeros(8, dtype=torch.bfloat16)
    info = pccl.TensorInfo.from_torch(t, "w")
    assert info.dtype is DataType.BFLOAT16 and info.numel == 8 and info.data_ptr == t.data_ptr()


@pytest.mark.parametrize("dt", list(NUMPY), ids=lambda d: d.name)
def test_numpy_tensor_info_every_dtype(dt):
    a = np.arange(6, dtype=NUMPY[dt]).reshape(2, 3)
    info = pccl.TensorInfo.from_numpy(a, "a")
    assert (info.dtype, info.numel, info.device_type, info.data_ptr) == (dt, 6, pccl.DeviceType.CPU, a.ctypes.data)


@pytest.mark.parametrize("dt", list(DataType), ids=lambda d: d.name)
def test_torch_tensor_info_every_dtype(dt):
    t = torch.zeros(2, 3, dtype=torch_dtype(dt))
    info = pccl.TensorInfo.from_torch(t, "t")
    assert (info.dtype, info.numel, info.device_type, info.data_ptr) == (dt, 6, pccl.DeviceType.CPU, t.data_ptr())
