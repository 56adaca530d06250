"""The C side: finds and loads libpccl.so, mirrors pccl.h's structs in ctypes, and looks functions
up lazily, so that a library which does not export a function yet fails only the call that needs it.

ctypes releases the GIL around every foreign call: a thread blocked in pcclConnect or pcclAllReduce
lets the other Python threads run.
"""
import ctypes
import ctypes.util
import os
import threading
from pathlib import Path

# Windows: `make windows` builds pccl.dll into build/win/lib (docs/platforms.md).
WINDOWS = os.name == "nt"
LIBRARY_NAME = "pccl.dll" if WINDOWS else "libpccl.so"
BUILD_LIB = Path("build", "win", "lib") if WINDOWS else Path("build", "lib")

# ---- ccoip_inet.h ------------------------------------------------------------------------------
INET_IPV4 = 0
INET_IPV6 = 1


class Ipv4Address(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint8 * 4)]


class Ipv6Address(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint8 * 16)]


class InetAddress(ctypes.Structure):
    _fields_ = [("protocol", ctypes.c_int), ("ipv4", Ipv4Address), ("ipv6", Ipv6Address)]


class SocketAddress(ctypes.Structure):
    _fields_ = [("inet", InetAddress), ("port", ctypes.c_uint16)]


# ---- pccl.h ------------------------------------------------------------------------------------
# Enums are C enums: int-sized on every ABI we target.
c_enum = ctypes.c_int


class CommCreateParams(ctypes.Structure):
    _fields_ = [("master_address", SocketAddress), ("peer_group", ctypes.c_uint32),
                ("p2p_connection_pool_size", ctypes.c_uint32)]


class ReduceInfoC(ctypes.Structure):
    _fields_ = [("local_world_size", ctypes.c_uint32), ("tx_bytes", ctypes.c_uint64), ("rx_bytes", ctypes.c_uint64)]


class ReduceOperandDescriptorC(ctypes.Structure):
    _fields_ = [("datatype", c_enum), ("distribution_hint", c_enum)]


class QuantizationOptionsC(ctypes.Structure):
    _fields_ = [("quantized_datatype", c_enum), ("algorithm", c_enum)]


class ReduceDescriptorC(ctypes.Structure):
    _fields_ = [("count", ctypes.c_size_t), ("op", c_enum), ("tag", ctypes.c_uint64),
                ("src_descriptor", ReduceOperandDescriptorC), ("quantization_options", QuantizationOptionsC)]


class ReduceOpDescriptorC(ctypes.Structure):
    _fields_ = [("sendbuf", ctypes.c_void_p), ("recvbuf", ctypes.c_void_p), ("descriptor", ReduceDescriptorC)]


class AsyncReduceOpC(ctypes.Structure):
    _fields_ = [("comm", ctypes.c_void_p), ("tag", ctypes.c_uint64)]


class TensorInfoC(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("count", ctypes.c_size_t),
                ("datatype", c_enum), ("device_type", c_enum), ("allow_content_inequality", ctypes.c_bool)]


class SharedStateC(ctypes.Structure):
    _fields_ = [("revision", ctypes.c_uint64), ("count", ctypes.c_size_t), ("infos", ctypes.POINTER(TensorInfoC))]


class SharedStateSyncInfoC(ctypes.Structure):
    _fields_ = [("tx_bytes", ctypes.c_uint64), ("rx_bytes", ctypes.c_uint64)]


class BuildInfoC(ctypes.Structure):
    _fields_ = [("has_cuda_support", ctypes.c_bool)]


class FingerprintEntryC(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 24), ("hash", ctypes.c_uint64)]


class DeterminismFingerprintC(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char * 64), ("compute_capability", ctypes.c_uint32),
                ("driver_version", ctypes.c_uint32), ("runtime_version", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("count", ctypes.c_uint32), ("entries", FingerprintEntryC * 32)]


_P = ctypes.POINTER
_vp = ctypes.c_void_p
_R = c_enum  # pcclResult_t

# name -> (restype, argtypes), exactly as declared in pccl.h.
PROTOTYPES = {
    "pcclInit": (_R, []),
    "pcclGetBuildInfo": (_R, [_P(BuildInfoC)]),
    "pcclResultString": (ctypes.c_char_p, [c_enum]),
    "pcclCreateCommunicator": (_R, [_P(CommCreateParams), _P(_vp)]),
    "pcclGetAttribute": (_R, [_vp, c_enum, _P(ctypes.c_int)]),
    "pcclDestroyCommunicator": (_R, [_vp]),
    "pcclConnect": (_R, [_vp]),
    "pcclUpdateTopology": (_R, [_vp]),
    "pcclArePeersPending": (_R, [_vp, _P(ctypes.c_bool)]),
    "pcclOptimizeTopology": (_R, [_vp]),
    "pcclAllReduce": (_R, [_vp, _vp, _P(ReduceDescriptorC), _vp, _P(ReduceInfoC)]),
    "pcclAllReduceAsync": (_R, [_vp, _vp, _P(ReduceDescriptorC), _vp, _P(AsyncReduceOpC)]),
    "pcclAwaitAsyncReduce": (_R, [_P(AsyncReduceOpC), _P(ReduceInfoC)]),
    "pcclAllReduceMultipleWithRetry": (_R, [_P(ReduceOpDescriptorC), ctypes.c_size_t, _vp, _P(ReduceInfoC),
                                            ctypes.c_int]),
    "pcclSynchronizeSharedState": (_R, [_vp, _P(SharedStateC), c_enum, _P(SharedStateSyncInfoC)]),
    "pcclCreateMaster": (_R, [SocketAddress, _P(_vp)]),
    "pcclRunMaster": (_R, [_vp]),
    "pcclInterruptMaster": (_R, [_vp]),
    "pcclMasterAwaitTermination": (_R, [_vp]),
    "pcclDestroyMaster": (_R, [_vp]),
    # Extensions (PCCL_HAS_*): ours, not PCCL's.
    "pcclSetCollectiveTimeout": (_R, [_vp, ctypes.c_uint32]),
    "pcclSetSecret": (_R, [_vp, ctypes.c_char_p, ctypes.c_size_t]),
    "pcclSetMasterSecret": (_R, [_vp, ctypes.c_char_p, ctypes.c_size_t]),
    "pcclSetEncryption": (_R, [_vp, ctypes.c_bool]),
    "pcclSetMasterEncryption": (_R, [_vp, ctypes.c_bool]),
    "pcclAllReduceOnStream": (_R, [_vp, _vp, _P(ReduceDescriptorC), _vp, _vp, _P(AsyncReduceOpC)]),
    "pcclGetDeterminismFingerprint": (_R, [ctypes.c_uint32, _P(DeterminismFingerprintC)]),
}


class SymbolMissing(Exception):
    """Raised by Library.fn when the loaded library does not export a function (turned into a
    PCCLError by the caller, which knows the error classes)."""

    def __init__(self, name, path):
        super().__init__(name, path)
        self.name = name
        self.path = path


def _candidates():
    """Where libpccl.so (pccl.dll) may be, in order: PCCL_LIBRARY, the package directory, the
    repository's build/lib (build/win/lib; when running from a source checkout), the system's
    library path."""
    env = os.environ.get("PCCL_LIBRARY")
    if env:
        p = Path(env)
        yield "PCCL_LIBRARY", p / LIBRARY_NAME if p.is_dir() else p
        return  # an explicit choice: never silently fall back to another copy
    here = Path(__file__).resolve().parent
    yield "the package directory", here / LIBRARY_NAME
    repo = here.parent.parent
    if (repo / "include" / "pccl.h").is_file():
        yield "the repository's " + BUILD_LIB.as_posix(), repo / BUILD_LIB / LIBRARY_NAME
    found = ctypes.util.find_library("pccl")
    if found:
        yield "the system library path", Path(found)


class Library:
    """The loaded libpccl and its functions, looked up on first use and cached."""

    def __init__(self):
        tried = []
        self.cdll = None
        for where, path in _candidates():
            if where == "the system library path" or path.is_file():
                try:
                    if WINDOWS and path.is_file():
                        # Python 3.8+ on Windows looks for a DLL's own imports only in the
                        # system's folders and those added here, not in PATH.
                        os.add_dll_directory(str(path.resolve().parent))
                    self.cdll = ctypes.CDLL(str(path))
                    self.path = str(path)
                    self.found_in = where
                    break
                except OSError as e:
                    tried.append(f"{path} ({where}): {e}")
                    if where == "PCCL_LIBRARY":
                        break
            else:
                tried.append(f"{path} ({where}): no such file")
        if self.cdll is None:
            raise OSError(f"pccl: cannot load {LIBRARY_NAME}; tried:\n  " + "\n  ".join(tried) +
                          f"\nBuild it (`make {'windows' if WINDOWS else 'build'}` in the repository) or set PCCL_LIBRARY "
                          "to its path.")
        self._fns = {}
        self._lock = threading.Lock()

    def has(self, name):
        try:
            self.fn(name)
            return True
        except SymbolMissing:
            return False

    def fn(self, name):
        f = self._fns.get(name)
        if f is not None:
            return f
        with self._lock:
            try:
                f = getattr(self.cdll, name)
            except AttributeError:
                raise SymbolMissing(name, self.path) from None
            restype, argtypes = PROTOTYPES[name]
            f.restype = restype
            f.argtypes = argtypes
            self._fns[name] = f
            return f


_library = None
_library_lock = threading.Lock()


def library():
    global _library
    if _library is None:
        with _library_lock:
            if _library is None:
                _library = Library()
    return _library
