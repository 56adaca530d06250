"""Enums (values fixed by pccl.h) and the error type."""
import sys
from enum import Enum, IntEnum


class Result(IntEnum):
    """pcclResult_t. An IntEnum, so that a status compares equal to its integer code."""
    SUCCESS = 0
    NOT_INITIALIZED = 1
    INTERNAL_ERROR = 2
    INVALID_ARGUMENT = 3
    INVALID_USAGE = 4
    TOO_FEW_PEERS = 5
    MASTER_CONNECTION_FAILED = 6
    RANK_CONNECTION_FAILED = 7
    RANK_CONNECTION_LOST = 8
    NO_SHARED_STATE_AVAILABLE = 9
    PENDING_ASYNC_OPS = 10
    UPDATE_TOPOLOGY_FAILED = 11
    TOPOLOGY_OPTIMIZATION_FAILED = 12
    COLLECTIVE_TIMEOUT = 100  # extension (PCCL_HAS_COLLECTIVE_TIMEOUT): the collective watchdog fired


def result_from_code(code):
    """The Result for a code, or the plain int for a code this package does not know (the library's
    extensions take values from 100 up)."""
    try:
        return Result(code)
    except ValueError:
        return int(code)


class PCCLError(Exception):
    """A PCCL call failed. `result` is the Result (or the int code of a result this package does not
    know), `code` its integer value, `func_name` the C function (or Python method) that failed."""

    def __init__(self, result, func_name, detail=None):
        self.result = result_from_code(int(result))
        self.code = int(result)
        self.func_name = func_name
        self.detail = detail
        super().__init__(self._message())

    def _message(self):
        name = self.result.name if isinstance(self.result, Result) else _result_string(self.code)
        msg = f"{self.func_name} failed: {name} ({self.code})"
        return f"{msg}: {self.detail}" if self.detail else msg

    def __str__(self):
        return self._message()

    def __reduce__(self):
        return (type(self), (self.code, self.func_name, self.detail))

    @staticmethod
    def check(result, func_name):
        """Raises PCCLError unless `result` is pcclSuccess."""
        if int(result) != Result.SUCCESS:
            raise PCCLError(result, func_name)


class PCCLArgumentError(PCCLError, ValueError):
    """A bad argument found before calling the library (result INVALID_ARGUMENT). Also a
    ValueError, as in PCCL's package, where unsupported dtypes raise ValueError."""

    def __init__(self, func_name, detail):
        super().__init__(Result.INVALID_ARGUMENT, func_name, detail)

    def __reduce__(self):
        return (type(self), (self.func_name, self.detail))


class PCCLNotExportedError(PCCLError):
    """The loaded libpccl.so does not export the C function a call needs (a library older than this
    package). Result INTERNAL_ERROR; `symbol` names the function, `library` the file."""

    def __init__(self, symbol, library):
        self.symbol = symbol
        self.library = library
        super().__init__(Result.INTERNAL_ERROR, symbol,
                         f"the loaded library {library} does not export {symbol} (it predates this function; "
                         f"rebuild libpccl or point PCCL_LIBRARY at a newer one)")

    def __reduce__(self):
        return (type(self), (self.symbol, self.library))


def _result_string(code):
    try:
        from pccl._native import library
        lib = library()
        if lib.has("pcclResultString"):
            s = lib.fn("pcclResultString")(code)
            if s:
                return s.decode("ascii", "replace")
    except Exception:  # naming an error must never raise another one
        pass
    return f"result {code}"


class ReduceOp(Enum):
    """pcclRedOp_t."""
    SUM = 0
    AVG = 1
    PROD = 2
    MAX = 3
    MIN = 4


class Attribute(Enum):
    """pcclAttribute_t. PCCL's Python package calls PEER_GROUP_WORLD_SIZE `LOCAL_WORLD_SIZE`; both
    names are accepted here."""
    GLOBAL_WORLD_SIZE = 1
    LOCAL_WORLD_SIZE = 2
    PEER_GROUP_WORLD_SIZE = 2  # alias of LOCAL_WORLD_SIZE
    NUM_DISTINCT_PEER_GROUPS = 3
    LARGEST_PEER_GROUP_WORLD_SIZE = 4


class SharedStateSyncStrategy(Enum):
    """pcclSharedStateSyncStrategy_t."""
    ENFORCE_POPULAR = 0
    RECEIVE_ONLY = 1
    SEND_ONLY = 2


class DistributionHint(Enum):
    """pcclDistributionHint_t."""
    NONE = 0
    NORMAL = 1
    UNIFORM = 2


class QuantizationAlgorithm(Enum):
    """pcclQuantizationAlgorithm_t."""
    NONE = 0
    MIN_MAX = 1
    ZERO_POINT_SCALE = 2


class DeviceType(Enum):
    """pcclDeviceType_t."""
    CPU = 0
    CUDA = 1

    @classmethod
    def from_torch_device_type(cls, device_type):
        """'cpu' -> CPU, 'cuda' -> CUDA, anything else -> None (as in PCCL's package)."""
        return {"cpu": cls.CPU, "cuda": cls.CUDA}.get(device_type)


# numpy: (kind, itemsize) -> value; numpy has no bfloat16.
_NUMPY_KINDS = {("u", 1): 0, ("i", 1): 1, ("i", 2): 2, ("u", 2): 3, ("u", 4): 4, ("i", 4): 5, ("u", 8): 6,
                ("i", 8): 7, ("f", 2): 8, ("f", 4): 10, ("f", 8): 11}
# torch: attribute name per value; uint16/uint32/uint64 exist from torch 2.3 on.
_TORCH_NAMES = {0: "uint8", 1: "int8", 2: "int16", 3: "uint16", 4: "uint32", 5: "int32", 6: "uint64",
                7: "int64", 8: "float16", 9: "bfloat16", 10: "float32", 11: "float64"}
_NUMPY_NAMES = {0: "uint8", 1: "int8", 2: "int16", 3: "uint16", 4: "uint32", 5: "int32", 6: "uint64",
                7: "int64", 8: "float16", 10: "float32", 11: "float64"}
_ITEMSIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 8, 7: 8, 8: 2, 9: 2, 10: 4, 11: 8}


class DataType(Enum):
    """pcclDataType_t: all twelve element types."""
    UINT8 = 0
    INT8 = 1
    INT16 = 2
    UINT16 = 3
    UINT32 = 4
    INT32 = 5
    UINT64 = 6
    INT64 = 7
    FLOAT16 = 8
    BFLOAT16 = 9
    FLOAT = 10
    DOUBLE = 11

    @property
    def itemsize(self):
        """Bytes per element."""
        return _ITEMSIZE[self.value]

    def to_torch_dtype(self):
        """The torch dtype; PCCLArgumentError if this torch has none (uint16/32/64 before torch 2.3)."""
        import torch
        dt = getattr(torch, _TORCH_NAMES[self.value], None)
        if not isinstance(dt, torch.dtype):
            raise PCCLArgumentError("DataType.to_torch_dtype",
                                    f"torch {torch.__version__} has no {_TORCH_NAMES[self.value]} dtype for {self.name}")
        return dt

    def to_numpy_dtype(self):
        """The numpy dtype; PCCLArgumentError for BFLOAT16, which numpy does not have."""
        import numpy as np
        name = _NUMPY_NAMES.get(self.value)
        if name is None:
            raise PCCLArgumentError("DataType.to_numpy_dtype", f"numpy has no dtype for {self.name}")
        return np.dtype(name)

    @classmethod
    def from_torch_dtype(cls, dtype):
        """The DataType of a torch dtype; PCCLArgumentError (a ValueError) if there is none."""
        torch = sys.modules.get("torch")
        if torch is not None:
            for value, name in _TORCH_NAMES.items():
                if getattr(torch, name, None) is dtype:
                    return cls(value)
        raise PCCLArgumentError("DataType.from_torch_dtype",
                                f"unsupported torch dtype {dtype}; supported: " +
                                ", ".join(f"torch.{n}" for n in _TORCH_NAMES.values()))

    @classmethod
    def from_numpy_dtype(cls, dtype):
        """The DataType of a numpy dtype (native byte order only); PCCLArgumentError if there is none."""
        import numpy as np
        dt = np.dtype(dtype)
        value = _NUMPY_KINDS.get((dt.kind, dt.itemsize))
        if value is None or dt.fields is not None or dt.subdtype is not None:
            raise PCCLArgumentError("DataType.from_numpy_dtype",
                                    f"unsupported numpy dtype {dt}; supported: {', '.join(_NUMPY_NAMES.values())} "
                                    "(numpy has no bfloat16: use a torch.bfloat16 tensor)")
        if not dt.isnative:
            raise PCCLArgumentError("DataType.from_numpy_dtype",
                                    f"numpy dtype {dt.str} is not in the machine's byte order; "
                                    "convert it with array.astype(array.dtype.newbyteorder('='))")
        return cls(value)
