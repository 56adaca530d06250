"""numpy arrays and torch tensors as (pointer, count, dtype, device) buffers, with the checks that
keep a bad buffer from reaching the library. numpy and torch are looked up in sys.modules, never
imported: an object can only be a torch tensor if the caller imported torch, and `import pccl`
stays fast without them."""
import sys

from pccl._enums import DataType, DeviceType, PCCLArgumentError


class Buffer:
    __slots__ = ("obj", "kind", "ptr", "count", "dtype", "device_type", "device", "writable")

    def __init__(self, obj, kind, ptr, count, dtype, device_type, device, writable):
        self.obj = obj  # keeps the memory alive while the library uses it
        self.kind = kind
        self.ptr = ptr
        self.count = count
        self.dtype = dtype
        self.device_type = device_type
        self.device = device
        self.writable = writable

    @property
    def nbytes(self):
        return self.count * self.dtype.itemsize


def _is_numpy(obj):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def _is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _cuda_supported():
    from pccl._api import build_info
    return build_info()["has_cuda_support"]


def as_buffer(obj, what, where):
    """Checks one numpy array or torch tensor and describes its memory. `what` names the argument
    and `where` the method, for the error message."""
    if _is_numpy(obj):
        try:
            dtype = DataType.from_numpy_dtype(obj.dtype)
        except PCCLArgumentError as e:
            raise PCCLArgumentError(where, f"{what}: {e.detail}") from None
        if not obj.flags["C_CONTIGUOUS"]:
            raise PCCLArgumentError(where, f"{what} is not C-contiguous (shape {obj.shape}, strides {obj.strides}); "
                                           "pass numpy.ascontiguousarray(...) and copy the result back")
        return Buffer(obj, "numpy", obj.__array_interface__["data"][0], int(obj.size), dtype, DeviceType.CPU, "cpu",
                      bool(obj.flags["WRITEABLE"]))
    if _is_torch(obj):
        torch = sys.modules["torch"]
        if obj.layout != torch.strided:
            raise PCCLArgumentError(where, f"{what} has layout {obj.layout}; only dense (strided) tensors are supported")
        try:
            dtype = DataType.from_torch_dtype(obj.dtype)
        except PCCLArgumentError as e:
            raise PCCLArgumentError(where, f"{what}: {e.detail}") from None
        if not obj.is_contiguous():
            raise PCCLArgumentError(where, f"{what} is not contiguous (shape {tuple(obj.shape)}, "
                                           f"stride {obj.stride()}); pass tensor.contiguous() and copy the result back")
        device_type = DeviceType.from_torch_device_type(obj.device.type)
        if device_type is None:
            raise PCCLArgumentError(where, f"{what} is on device {obj.device}; only cpu and cuda tensors are supported")
        if device_type is DeviceType.CUDA and not _cuda_supported():
            raise PCCLArgumentError(where, f"{what} is on {obj.device} but this libpccl was built without CUDA support")
        return Buffer(obj, "torch", int(obj.data_ptr()), int(obj.numel()), dtype, device_type, str(obj.device), True)
    raise PCCLArgumentError(where, f"{what} must be a numpy.ndarray or a torch.Tensor, not {type(obj).__name__}")


def as_buffer_pair(send, recv, where):
    """send and recv of one reduction: same library, dtype, element count and device; recv writable;
    either the same memory or disjoint (a partial overlap would corrupt the result)."""
    s = as_buffer(send, "send", where)
    r = as_buffer(recv, "recv", where)
    if s.kind != r.kind:
        raise PCCLArgumentError(where, f"send is a {s.kind} buffer and recv a {r.kind} one; pass two numpy arrays "
                                       "or two torch tensors")
    if s.dtype is not r.dtype:
        raise PCCLArgumentError(where, f"send has dtype {send.dtype} and recv {recv.dtype}; they must be the same")
    if s.count != r.count:
        raise PCCLArgumentError(where, f"send has {s.count} elements and recv {r.count}; they must be the same size")
    if s.device != r.device:
        raise PCCLArgumentError(where, f"send is on {s.device} and recv on {r.device}; they must be on the same device")
    if not r.writable:
        raise PCCLArgumentError(where, "recv is read-only")
    if s.ptr != r.ptr and s.count > 0 and s.ptr < r.ptr + r.nbytes and r.ptr < s.ptr + s.nbytes:
        raise PCCLArgumentError(where, "send and recv overlap partially; pass the same buffer twice for an "
                                       "in-place reduction, or two disjoint ones")
    return s, r
