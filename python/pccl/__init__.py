"""pccl: Python bindings of libpccl, a fault-tolerant collective communications library with the
C API of PCCL 1.0. Mirrors the API of PCCL's own Python package on numpy arrays and torch tensors.

Importing it loads libpccl.so (PCCL_LIBRARY, else the package directory, else a source checkout's
build/lib, else the system library path) and calls pcclInit.
"""
from pccl._enums import (Attribute, DataType, DeviceType, DistributionHint, PCCLArgumentError, PCCLError,
                         PCCLNotExportedError, QuantizationAlgorithm, ReduceOp, Result, SharedStateSyncStrategy)
from pccl._api import (AsyncReduceHandle, Communicator, MasterNode, QuantizationOptions, ReduceDescriptor, ReduceInfo,
                       ReduceOpDescriptor, ReduceOperandDescriptor, SharedState, SharedStateSyncInfo, TensorInfo,
                       build_info, determinism_fingerprint, is_exported, library_path)

__version__ = "0.1.0"

__all__ = [
    "AsyncReduceHandle", "Attribute", "Communicator", "DataType", "DeviceType", "DistributionHint", "MasterNode",
    "PCCLArgumentError", "PCCLError", "PCCLNotExportedError", "QuantizationAlgorithm", "QuantizationOptions",
    "ReduceDescriptor", "ReduceInfo", "ReduceOp", "ReduceOpDescriptor", "ReduceOperandDescriptor", "Result",
    "SharedState", "SharedStateSyncInfo", "SharedStateSyncStrategy", "TensorInfo", "build_info", "determinism_fingerprint", "is_exported",
    "library_path",
]
