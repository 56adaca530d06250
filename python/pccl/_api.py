"""The public classes: Communicator, MasterNode, SharedState, TensorInfo, the reduce descriptors and
the async handle. Mirrors PCCL's Python package; differences are additions (close(), context
managers, MasterNode.await_termination(), argument checks that raise PCCLError)."""
import ctypes
import ipaddress
import logging
import operator
import socket
import threading
import time

from pccl import _native
from pccl._buffers import as_buffer, as_buffer_pair
from pccl._enums import (Attribute, DataType, DeviceType, DistributionHint, PCCLArgumentError, PCCLError,
                         PCCLNotExportedError, QuantizationAlgorithm, ReduceOp, Result, SharedStateSyncStrategy,
                         result_from_code)

log = logging.getLogger("pccl")

_lib = _native.library()
_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1


def _fn(name):
    try:
        return _lib.fn(name)
    except _native.SymbolMissing as e:
        raise PCCLNotExportedError(e.name, e.path) from None


def _check(name, *args):
    r = _fn(name)(*args)
    if r != Result.SUCCESS:
        raise PCCLError(r, name)


_check("pcclInit")


def library_path():
    """The file of the loaded libpccl.so."""
    return _lib.path


def is_exported(symbol):
    """Whether the loaded libpccl.so exports the C function `symbol` (e.g. "pcclAllReduce")."""
    if symbol not in _native.PROTOTYPES:
        raise PCCLArgumentError("is_exported", f"{symbol!r} is not a function of pccl.h")
    return _lib.has(symbol)


_build_info = None


def build_info():
    """{'has_cuda_support': bool} from pcclGetBuildInfo."""
    global _build_info
    if _build_info is None:
        info = _native.BuildInfoC()
        _check("pcclGetBuildInfo", ctypes.byref(info))
        _build_info = {"has_cuda_support": bool(info.has_cuda_support)}
    return dict(_build_info)


def determinism_fingerprint(*, quick=False, cpu=False):
    """This machine's determinism fingerprint (pcclGetDeterminismFingerprint, docs/fingerprint.md):
    {'device', 'compute_capability', 'driver_version', 'runtime_version', 'flags',
    'hashes': {function name: 64-bit hash}}. quick: 2^24 instead of 2^32 inputs a float function;
    cpu: the CPU reference of the functions IEEE 754 fixes (no GPU needed)."""
    fp = _native.DeterminismFingerprintC()
    _check("pcclGetDeterminismFingerprint", (1 if quick else 0) | (2 if cpu else 0), ctypes.byref(fp))
    return {"device": fp.device.decode(), "compute_capability": int(fp.compute_capability),
            "driver_version": int(fp.driver_version), "runtime_version": int(fp.runtime_version),
            "flags": int(fp.flags),
            "hashes": {fp.entries[i].name.decode(): int(fp.entries[i].hash) for i in range(min(fp.count, 32))}}


# ---- arguments ---------------------------------------------------------------------------------

def _index(value):
    """The int of an integer-like value (int, numpy integer), or None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _enum(cls, value, what, where):
    if isinstance(value, cls):
        return value
    if _index(value) is not None:
        try:
            return cls(_index(value))
        except ValueError:
            pass
    raise PCCLArgumentError(where, f"{what} must be a pccl.{cls.__name__}, not {value!r}")


def _uint(value, what, where, hi, lo=0):
    v = _index(value)
    if v is None or not lo <= v <= hi:
        raise PCCLArgumentError(where, f"{what} must be an integer in [{lo}, {hi}], not {value!r}")
    return v


def _parse_address(address, where, allow_port_zero):
    """"ip:port", "[ipv6]:port" or "host:port" -> ccoip_socket_address_t."""
    if not isinstance(address, str):
        raise PCCLArgumentError(where, f"address must be a str 'host:port', not {address!r}")
    host, sep, port_s = address.rpartition(":")
    if not sep or not host or not port_s.isdigit():
        raise PCCLArgumentError(where, f"invalid address {address!r}: expected 'ip:port' (or '[ipv6]:port')")
    port = int(port_s)
    if not (0 if allow_port_zero else 1) <= port <= 65535:
        raise PCCLArgumentError(where, f"invalid port {port} in {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:  # a host name: prefer IPv4, like the master's default 0.0.0.0 listener
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            raise PCCLArgumentError(where, f"cannot resolve {host!r} in {address!r}: {e}") from None
        infos.sort(key=lambda i: i[0] != socket.AF_INET)
        ip = ipaddress.ip_address(infos[0][4][0].split("%")[0])
    a = _native.SocketAddress()
    if ip.version == 4:
        a.inet.protocol = _native.INET_IPV4
        a.inet.ipv4.data[:] = list(ip.packed)
    else:
        a.inet.protocol = _native.INET_IPV6
        a.inet.ipv6.data[:] = list(ip.packed)
    a.port = port
    return a


# ---- results -----------------------------------------------------------------------------------

class ReduceInfo:
    """What an all-reduce reports: the peer group's world size it ran with, bytes sent and received."""

    def __init__(self, local_world_size, tx_bytes, rx_bytes):
        self.local_world_size = local_world_size
        self.tx_bytes = tx_bytes
        self.rx_bytes = rx_bytes

    @property
    def world_size(self):
        """Alias of local_world_size (the name in older PCCL releases)."""
        return self.local_world_size

    @classmethod
    def _from_c(cls, c):
        return cls(int(c.local_world_size), int(c.tx_bytes), int(c.rx_bytes))

    def __eq__(self, other):
        return isinstance(other, ReduceInfo) and (self.local_world_size, self.tx_bytes, self.rx_bytes) == (
            other.local_world_size, other.tx_bytes, other.rx_bytes)

    def __repr__(self):
        return f"ReduceInfo(local_world_size={self.local_world_size}, tx_bytes={self.tx_bytes}, rx_bytes={self.rx_bytes})"


class SharedStateSyncInfo:
    """What a shared-state sync reports: bytes sent and received."""

    def __init__(self, tx_bytes, rx_bytes):
        self.tx_bytes = tx_bytes
        self.rx_bytes = rx_bytes

    def __eq__(self, other):
        return isinstance(other, SharedStateSyncInfo) and (self.tx_bytes, self.rx_bytes) == (other.tx_bytes,
                                                                                             other.rx_bytes)

    def __repr__(self):
        return f"SharedStateSyncInfo(tx_bytes={self.tx_bytes}, rx_bytes={self.rx_bytes})"


# ---- reduce descriptors ------------------------------------------------------------------------

class ReduceOperandDescriptor:
    """The element type of the operands and a hint about their distribution (for quantization)."""

    def __init__(self, datatype, distribution_hint=DistributionHint.NONE):
        where = "ReduceOperandDescriptor"
        self.datatype = _enum(DataType, datatype, "datatype", where)
        self.distribution_hint = _enum(DistributionHint, distribution_hint, "distribution_hint", where)

    def __repr__(self):
        return f"ReduceOperandDescriptor({self.datatype}, {self.distribution_hint})"


class QuantizationOptions:
    """How operands are quantized on the wire; algorithm NONE sends them as they are."""

    def __init__(self, quantized_datatype=DataType.UINT8, algorithm=QuantizationAlgorithm.MIN_MAX):
        where = "QuantizationOptions"
        self.quantized_datatype = _enum(DataType, quantized_datatype, "quantized_datatype", where)
        self.algorithm = _enum(QuantizationAlgorithm, algorithm, "algorithm", where)

    def __repr__(self):
        return f"QuantizationOptions({self.quantized_datatype}, {self.algorithm})"


class ReduceDescriptor:
    """count elements, op, tag, operand type and quantization: pcclReduceDescriptor_t. Without
    quantization_options the operands are not quantized."""

    def __init__(self, count, op, tag, operand_descriptor, quantization_options=None):
        where = "ReduceDescriptor"
        self.count = _uint(count, "count", where, _U64_MAX)
        self.op = _enum(ReduceOp, op, "op", where)
        self.tag = _uint(tag, "tag", where, _U64_MAX)
        if not isinstance(operand_descriptor, ReduceOperandDescriptor):
            raise PCCLArgumentError(where, f"operand_descriptor must be a ReduceOperandDescriptor, not "
                                           f"{operand_descriptor!r}")
        self.operand_descriptor = operand_descriptor
        if quantization_options is None:
            quantization_options = QuantizationOptions(operand_descriptor.datatype, QuantizationAlgorithm.NONE)
        if not isinstance(quantization_options, QuantizationOptions):
            raise PCCLArgumentError(where, f"quantization_options must be QuantizationOptions, not "
                                           f"{quantization_options!r}")
        self.quantization_options = quantization_options

    def _fill(self, c):
        c.count = self.count
        c.op = self.op.value
        c.tag = self.tag
        c.src_descriptor.datatype = self.operand_descriptor.datatype.value
        c.src_descriptor.distribution_hint = self.operand_descriptor.distribution_hint.value
        c.quantization_options.quantized_datatype = self.quantization_options.quantized_datatype.value
        c.quantization_options.algorithm = self.quantization_options.algorithm.value

    def to_c(self):
        c = _native.ReduceDescriptorC()
        self._fill(c)
        return c

    def __repr__(self):
        return (f"ReduceDescriptor(count={self.count}, op={self.op}, tag={self.tag}, {self.operand_descriptor}, "
                f"{self.quantization_options})")


def _check_descriptor_fits(desc, s, where):
    if desc.operand_descriptor.datatype is not s.dtype:
        raise PCCLArgumentError(where, f"the descriptor's datatype {desc.operand_descriptor.datatype.name} does not "
                                       f"match the buffers' {s.dtype.name}")
    if desc.count > s.count:
        raise PCCLArgumentError(where, f"the descriptor's count {desc.count} exceeds the buffers' {s.count} elements")


class ReduceOpDescriptor:
    """One all-reduce of all_reduce_multiple_with_retry: send and recv buffers and a ReduceDescriptor.
    Build it with from_torch or from_numpy, which check the buffers and keep them alive."""

    def __init__(self, sendbuf_ptr, recvbuf_ptr, reduce_descriptor):
        if not isinstance(reduce_descriptor, ReduceDescriptor):
            raise PCCLArgumentError("ReduceOpDescriptor", "reduce_descriptor must be a ReduceDescriptor")
        self.sendbuf_ptr = _uint(sendbuf_ptr, "sendbuf_ptr", "ReduceOpDescriptor", _U64_MAX)
        self.recvbuf_ptr = _uint(recvbuf_ptr, "recvbuf_ptr", "ReduceOpDescriptor", _U64_MAX)
        self.reduce_descriptor = reduce_descriptor
        self._keepalive = None

    @classmethod
    def _from_buffers(cls, send, recv, reduce_descriptor, where):
        s, r = as_buffer_pair(send, recv, where)
        if not isinstance(reduce_descriptor, ReduceDescriptor):
            raise PCCLArgumentError(where, "reduce_descriptor must be a ReduceDescriptor")
        _check_descriptor_fits(reduce_descriptor, s, where)
        d = cls(s.ptr, r.ptr, reduce_descriptor)
        d._keepalive = (send, recv)
        return d

    @staticmethod
    def from_torch(send, recv, reduce_descriptor):
        return ReduceOpDescriptor._from_buffers(send, recv, reduce_descriptor, "ReduceOpDescriptor.from_torch")

    @staticmethod
    def from_numpy(send, recv, reduce_descriptor):
        return ReduceOpDescriptor._from_buffers(send, recv, reduce_descriptor, "ReduceOpDescriptor.from_numpy")

    def to_c_inpl(self, c):
        c.sendbuf = self.sendbuf_ptr
        c.recvbuf = self.recvbuf_ptr
        self.reduce_descriptor._fill(c.descriptor)

    def to_c(self):
        c = _native.ReduceOpDescriptorC()
        self.to_c_inpl(c)
        return c


# ---- shared state ------------------------------------------------------------------------------

class TensorInfo:
    """One named tensor of a SharedState. from_numpy / from_torch keep the array alive."""

    def __init__(self, name, data_ptr, *, numel, dtype, device_type=DeviceType.CPU, allow_content_inequality=False):
        where = "TensorInfo"
        if not isinstance(name, str) or not name or "\0" in name:
            raise PCCLArgumentError(where, f"name must be a non-empty str without NUL, not {name!r}")
        if _index(data_ptr) in (None, 0):
            raise PCCLArgumentError(where, f"invalid data pointer {data_ptr!r} for tensor {name!r}")
        self.name = name
        self.data_ptr = _uint(data_ptr, "data_ptr", where, _U64_MAX)
        self.numel = _uint(numel, "numel", where, _U64_MAX)
        self.dtype = _enum(DataType, dtype, "dtype", where)
        self.device_type = _enum(DeviceType, device_type, "device_type", where)
        self.allow_content_inequality = bool(allow_content_inequality)
        self._owner = None

    @classmethod
    def _from_buffer(cls, tensor, name, allow_content_inequality, where):
        b = as_buffer(tensor, f"tensor {name!r}", where)
        if b.count == 0:
            raise PCCLArgumentError(where, f"tensor {name!r} is empty")
        if not b.writable:
            raise PCCLArgumentError(where, f"tensor {name!r} is read-only; a sync may have to write it")
        info = cls(name, b.ptr, numel=b.count, dtype=b.dtype, device_type=b.device_type,
                   allow_content_inequality=allow_content_inequality)
        info._owner = tensor
        return info

    @classmethod
    def from_torch(cls, tensor, name, *, allow_content_inequality=False):
        return cls._from_buffer(tensor, name, allow_content_inequality, "TensorInfo.from_torch")

    @classmethod
    def from_numpy(cls, tensor, name, *, allow_content_inequality=False):
        return cls._from_buffer(tensor, name, allow_content_inequality, "TensorInfo.from_numpy")

    def __repr__(self):
        return (f"TensorInfo({self.name!r}, numel={self.numel}, dtype={self.dtype}, device_type={self.device_type}, "
                f"allow_content_inequality={self.allow_content_inequality})")


class SharedState:
    """The tensors that every peer keeps bit-identical, and their revision (pcclSharedState_t)."""

    def __init__(self, tensor_infos):
        where = "SharedState"
        infos = list(tensor_infos)
        if not infos:
            raise PCCLArgumentError(where, "at least one TensorInfo is needed")
        names = set()
        for i in infos:
            if not isinstance(i, TensorInfo):
                raise PCCLArgumentError(where, f"expected TensorInfo objects, got {type(i).__name__}")
            if i.name in names:
                raise PCCLArgumentError(where, f"two tensors are named {i.name!r}; names must be unique")
            names.add(i.name)
        self._tensor_infos = infos
        self._names = [ctypes.create_string_buffer(i.name.encode("utf-8")) for i in infos]
        self._infos = (_native.TensorInfoC * len(infos))()
        for c, i, n in zip(self._infos, infos, self._names):
            c.name = ctypes.cast(n, ctypes.c_char_p)
            c.data = i.data_ptr
            c.count = i.numel
            c.datatype = i.dtype.value
            c.device_type = i.device_type.value
            c.allow_content_inequality = i.allow_content_inequality
        self._state = _native.SharedStateC(0, len(infos), self._infos)

    @property
    def tensor_infos(self):
        return list(self._tensor_infos)

    @property
    def revision(self):
        return int(self._state.revision)

    @revision.setter
    def revision(self, value):
        self._state.revision = _uint(value, "revision", "SharedState.revision", _U64_MAX)

    def push_revision(self):
        """revision += 1."""
        self.revision = self.revision + 1


# ---- the communicator --------------------------------------------------------------------------

class AsyncReduceHandle:
    """An all-reduce started by all_reduce_async. wait() blocks until it ends and returns
    (is_success, status, ReduceInfo); it may be called again and returns the same tuple. The send
    and recv buffers stay referenced until the operation ends (a handle dropped without wait()
    leaves them with its communicator until close())."""

    def __init__(self, comm, handle, keepalive):
        self._comm = comm
        self._handle = handle
        self._keepalive = keepalive
        self._info = None
        self._lock = threading.Lock()

    @property
    def tag(self):
        return int(self._handle.tag)

    def wait(self):
        with self._lock:
            if self._info is None:
                c = _native.ReduceInfoC()
                with self._comm._use("AsyncReduceHandle.wait", allow_closed=True) as ptr:
                    if ptr is None:
                        # The communicator was closed first: destroying it ended the operation and
                        # its outcome is unknown. Report a failure, never a made-up success.
                        status = Result.INVALID_USAGE
                    else:
                        status = result_from_code(_fn("pcclAwaitAsyncReduce")(ctypes.byref(self._handle),
                                                                              ctypes.byref(c)))
                self._info = (status == Result.SUCCESS, status, ReduceInfo._from_c(c))
                self._keepalive = None
            return self._info

    def __del__(self):
        # Dropped without wait(): the library may still read send and write recv. Never block in a
        # finalizer; hand the buffers to the communicator, which keeps them until it is closed.
        try:
            if self._info is None and self._keepalive is not None and not self._comm.closed:
                self._comm._orphans.append(self._keepalive)
        except Exception:
            pass


class _Use:
    """Counts a call in flight on a communicator or master, so that close() from another thread
    never frees the C object under it."""
    __slots__ = ("owner", "where", "allow_closed")

    def __init__(self, owner, where, allow_closed):
        self.owner, self.where, self.allow_closed = owner, where, allow_closed

    def __enter__(self):
        o = self.owner
        with o._state_lock:
            if o._ptr is None and not self.allow_closed:
                raise PCCLError(Result.INVALID_USAGE, self.where, f"this {type(o).__name__} is closed")
            o._busy += 1
            return o._ptr

    def __exit__(self, *exc):
        with self.owner._state_lock:
            self.owner._busy -= 1
        return False


def _secret_bytes(secret, where):
    """The run secret as bytes (str is UTF-8), 16 to 4096 of them (docs/security.md)."""
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, (bytes, bytearray)) or not 16 <= len(secret) <= 4096:
        raise PCCLArgumentError(where, "secret must be str or bytes of 16 to 4096 bytes")
    return bytes(secret)


class _Handle:
    """A C object that close() destroys: `with` closes it, and so does the garbage collector."""

    @property
    def closed(self):
        return self._ptr is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Communicator(_Handle):
    """A peer's communicator. `address` is the master's "ip:port". `secret` (extension, libpccl
    only): the run secret every connection proves (pcclSetSecret); without it, PCCL_SECRET_FILE
    is read at connect(), and without that the run is open. `encrypt` (extension): True/False
    encrypts the data links or not whatever PCCL_ENCRYPT says (needs the secret)."""

    def __init__(self, address, peer_group=0, p2p_connection_pool_size=0, secret=None, encrypt=None):
        where = "Communicator"
        self._ptr = None
        self._busy = 0
        self._state_lock = threading.Lock()
        self._orphans = []  # buffers of async all-reduces whose handle was dropped unwaited
        self._params = _native.CommCreateParams()
        self._params.master_address = _parse_address(address, where, allow_port_zero=False)
        self._params.peer_group = _uint(peer_group, "peer_group", where, _U32_MAX)
        self._params.p2p_connection_pool_size = _uint(p2p_connection_pool_size, "p2p_connection_pool_size", where,
                                                      _U32_MAX)
        self.address = address
        self.peer_group = peer_group
        self._secret = None if secret is None else _secret_bytes(secret, where)
        if encrypt is not None and not isinstance(encrypt, bool):
            raise PCCLArgumentError(where, f"encrypt must be a bool or None, not {encrypt!r}")
        self._encrypt = encrypt
        self._ptr = self._create()

    def _create(self):
        p = ctypes.c_void_p()
        _check("pcclCreateCommunicator", ctypes.byref(self._params), ctypes.byref(p))
        if self._secret is not None:  # every fresh communicator of connect()'s retries too
            r = _fn("pcclSetSecret")(p, self._secret, len(self._secret))
            if r != Result.SUCCESS:
                _fn("pcclDestroyCommunicator")(p)
                raise PCCLError(r, "pcclSetSecret")
        if self._encrypt is not None:
            r = _fn("pcclSetEncryption")(p, self._encrypt)
            if r != Result.SUCCESS:
                _fn("pcclDestroyCommunicator")(p)
                raise PCCLError(r, "pcclSetEncryption")
        return p

    def _use(self, where, allow_closed=False):
        return _Use(self, where, allow_closed)

    # -- lifecycle --

    def close(self):
        """Destroys the communicator: closes its connections and joins its threads. Idempotent.
        Async handles not waited for yet then report a failure (INVALID_USAGE)."""
        with self._state_lock:
            if self._ptr is None:
                return
            if self._busy:
                raise PCCLError(Result.INVALID_USAGE, "Communicator.close",
                                "a call on this communicator is still running in another thread")
            ptr, self._ptr = self._ptr, None
        try:
            _check("pcclDestroyCommunicator", ptr)
        finally:
            self._orphans.clear()  # destroying ended every operation

    # -- membership --

    def connect(self, n_attempts=5):
        """Connects to the master and blocks until the accepted peers admit this one. Tries
        n_attempts times, one second apart; raises the last attempt's PCCLError (a
        MASTER_CONNECTION_FAILED when nobody answers; PCCL_CONNECT_TIMEOUT_MS bounds one attempt)."""
        _uint(n_attempts, "n_attempts", "Communicator.connect", 1 << 31, lo=1)
        for attempt in range(1, n_attempts + 1):
            with self._use("Communicator.connect") as ptr:
                r = _fn("pcclConnect")(ptr)
            if r == Result.SUCCESS:
                log.info("connected to the master at %s", self.address)
                return
            err = PCCLError(r, "pcclConnect")
            if r != Result.MASTER_CONNECTION_FAILED:
                raise err
            log.warning("cannot connect to the master at %s (attempt %d/%d): %s", self.address, attempt, n_attempts,
                        err)
            if attempt == n_attempts:
                raise err
            # A communicator connects once: the next attempt takes a fresh one.
            with self._state_lock:
                if self._busy:
                    raise PCCLError(Result.INVALID_USAGE, "Communicator.connect",
                                    "another call is running on this communicator")
                old, self._ptr = self._ptr, None
            if old is not None:
                _fn("pcclDestroyCommunicator")(old)
            time.sleep(1.0)
            new = self._create()
            with self._state_lock:
                self._ptr = new

    def update_topology(self):
        """Collective among the accepted peers: admits pending peers and (re)connects the ring.
        UPDATE_TOPOLOGY_FAILED means: call it again."""
        with self._use("Communicator.update_topology") as ptr:
            _check("pcclUpdateTopology", ptr)

    def are_peers_pending(self):
        """Collective among the accepted peers: whether peers wait for admission."""
        out = ctypes.c_bool()
        with self._use("Communicator.are_peers_pending") as ptr:
            _check("pcclArePeersPending", ptr, ctypes.byref(out))
        return bool(out.value)

    def optimize_topology(self):
        """Collective: measures missing bandwidths and adopts the ring order the master computes."""
        with self._use("Communicator.optimize_topology") as ptr:
            _check("pcclOptimizeTopology", ptr)

    def get_attribute(self, attribute):
        """World sizes and peer-group counts as the master last reported them."""
        a = _enum(Attribute, attribute, "attribute", "Communicator.get_attribute")
        out = ctypes.c_int()
        with self._use("Communicator.get_attribute") as ptr:
            _check("pcclGetAttribute", ptr, a.value, ctypes.byref(out))
        return int(out.value)

    def set_collective_timeout(self, timeout_ms):
        """Extension (libpccl only): a collective that makes no progress for timeout_ms fails with
        Result.COLLECTIVE_TIMEOUT on every member; 0 restores the default (10 minutes, or
        PCCL_COLLECTIVE_TIMEOUT_MS)."""
        where = "Communicator.set_collective_timeout"
        if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or not 0 <= timeout_ms < 2 ** 32:
            raise PCCLArgumentError(where, f"timeout_ms must be an int in [0, 2**32), not {timeout_ms!r}")
        with self._use(where) as ptr:
            _check("pcclSetCollectiveTimeout", ptr, timeout_ms)

    # -- shared state --

    def sync_shared_state(self, shared_state, strategy=SharedStateSyncStrategy.ENFORCE_POPULAR):
        """Makes this peer's shared state the popular one (hash, elect, fetch what differs)."""
        where = "Communicator.sync_shared_state"
        if not isinstance(shared_state, SharedState):
            raise PCCLArgumentError(where, f"shared_state must be a SharedState, not {type(shared_state).__name__}")
        strategy = _enum(SharedStateSyncStrategy, strategy, "strategy", where)
        info = _native.SharedStateSyncInfoC()
        with self._use(where) as ptr:
            _check("pcclSynchronizeSharedState", ptr, ctypes.byref(shared_state._state), strategy.value,
                   ctypes.byref(info))
        return SharedStateSyncInfo(int(info.tx_bytes), int(info.rx_bytes))

    # -- all-reduce --

    def _descriptor(self, send, recv, op, tag, operand_descriptor, quantization_options, where):
        s, r = as_buffer_pair(send, recv, where)
        op = _enum(ReduceOp, op, "op", where)
        tag = _uint(tag, "tag", where, _U64_MAX)
        if operand_descriptor is None:
            operand_descriptor = ReduceOperandDescriptor(s.dtype, DistributionHint.NONE)
        elif not isinstance(operand_descriptor, ReduceOperandDescriptor):
            raise PCCLArgumentError(where, "operand_descriptor must be a ReduceOperandDescriptor")
        desc = ReduceDescriptor(s.count, op, tag, operand_descriptor, quantization_options)
        _check_descriptor_fits(desc, s, where)
        return s, r, desc.to_c()

    def all_reduce(self, send, recv, *, op, tag=0, operand_descriptor=None, quantization_options=None, stream=None):
        """Blocking all-reduce of send into recv (numpy arrays or torch tensors of one dtype, size
        and device; send may be recv) over the accepted peers of this peer group.

        stream= (torch CUDA tensors only; a torch.cuda.Stream, or a cudaStream_t as an int): the
        all-reduce is ordered on that stream instead (pcclAllReduceOnStream, docs/cuda-streams.md):
        the call returns at once with an AsyncReduceHandle; work queued on the stream afterwards
        sees the result (or, if the op fails, recv filled with NaN/0xFF bytes); handle.wait()
        gives the outcome and frees the tag."""
        where = "Communicator.all_reduce"
        if stream is not None:
            return self._all_reduce_on_stream(send, recv, op, tag, operand_descriptor, quantization_options,
                                              stream, where)
        with self._use(where) as ptr:
            s, r, desc = self._descriptor(send, recv, op, tag, operand_descriptor, quantization_options, where)
            info = _native.ReduceInfoC()
            _check("pcclAllReduce", s.ptr, r.ptr, ctypes.byref(desc), ptr, ctypes.byref(info))
        return ReduceInfo._from_c(info)

    def _all_reduce_on_stream(self, send, recv, op, tag, operand_descriptor, quantization_options, stream, where):
        handle_of = getattr(stream, "cuda_stream", stream)  # torch.cuda.Stream or a raw handle
        if isinstance(handle_of, bool) or not isinstance(handle_of, int) or handle_of < 0:
            raise PCCLArgumentError(where, "stream must be a torch.cuda.Stream or a cudaStream_t as an int")
        with self._use(where) as ptr:
            s, r, desc = self._descriptor(send, recv, op, tag, operand_descriptor, quantization_options, where)
            if s.device_type is not DeviceType.CUDA:
                raise PCCLArgumentError(where, "stream= needs CUDA tensors")
            handle = _native.AsyncReduceOpC()
            _check("pcclAllReduceOnStream", s.ptr, r.ptr, ctypes.byref(desc), ptr, ctypes.c_void_p(handle_of),
                   ctypes.byref(handle))
        return AsyncReduceHandle(self, handle, (send, recv))

    def all_reduce_async(self, send, recv, *, op, tag=0, operand_descriptor=None, quantization_options=None):
        """Starts an all-reduce and returns an AsyncReduceHandle; several with distinct tags may be
        in flight. send and recv must not be touched until handle.wait() returns."""
        where = "Communicator.all_reduce_async"
        with self._use(where) as ptr:
            s, r, desc = self._descriptor(send, recv, op, tag, operand_descriptor, quantization_options, where)
            handle = _native.AsyncReduceOpC()
            _check("pcclAllReduceAsync", s.ptr, r.ptr, ctypes.byref(desc), ptr, ctypes.byref(handle))
        h = AsyncReduceHandle(self, handle, (send, recv))
        return h

    def all_reduce_multiple_with_retry(self, descriptors, *, max_in_flight=4):
        """Runs several all-reduces (ReduceOpDescriptor list), at most max_in_flight at once,
        retrying failed ones with the peers that remain until all succeed or fewer than two peers
        are left."""
        where = "Communicator.all_reduce_multiple_with_retry"
        descriptors = list(descriptors)
        for d in descriptors:
            if not isinstance(d, ReduceOpDescriptor):
                raise PCCLArgumentError(where, f"descriptors must be ReduceOpDescriptor objects, not "
                                               f"{type(d).__name__}")
        tags = [d.reduce_descriptor.tag for d in descriptors]
        if len(set(tags)) != len(tags):
            raise PCCLArgumentError(where, "two descriptors share a tag; every all-reduce needs its own")
        max_in_flight = _uint(max_in_flight, "max_in_flight", where, (1 << 31) - 1, lo=1)
        arr = (_native.ReduceOpDescriptorC * len(descriptors))()
        for c, d in zip(arr, descriptors):
            d.to_c_inpl(c)
        info = _native.ReduceInfoC()
        with self._use(where) as ptr:
            _check("pcclAllReduceMultipleWithRetry", arr, len(descriptors), ptr, ctypes.byref(info), max_in_flight)
        return ReduceInfo._from_c(info)

    def __repr__(self):
        return f"Communicator({self.address!r}, peer_group={self.peer_group}{', closed' if self.closed else ''})"


class MasterNode(_Handle):
    """A master inside this process (the pccl-master binary runs the same code). run() returns at
    once; the master serves on its own thread until interrupt()."""

    def __init__(self, listen_address, secret=None, encrypt=False):
        where = "MasterNode"
        key = None if secret is None else _secret_bytes(secret, where)
        self._ptr = None
        self._busy = 0
        self._state_lock = threading.Lock()
        self._running = False
        self._address = _parse_address(listen_address, where, allow_port_zero=True)
        self.listen_address = listen_address
        p = ctypes.c_void_p()
        _check("pcclCreateMaster", self._address, ctypes.byref(p))
        self._ptr = p
        if key is not None:
            _check("pcclSetMasterSecret", p, key, len(key))
        if encrypt:
            _check("pcclSetMasterEncryption", p, True)

    def _use(self, where):
        return _Use(self, where, False)

    def run(self):
        """Starts the master's event loop on its own thread; returns at once."""
        with self._use("MasterNode.run") as ptr:
            _check("pcclRunMaster", ptr)
            self._running = True

    def interrupt(self):
        """Asks the master to stop; await_termination() waits until it has."""
        with self._use("MasterNode.interrupt") as ptr:
            _check("pcclInterruptMaster", ptr)

    def await_termination(self):
        """Blocks until the master stopped (after interrupt())."""
        with self._use("MasterNode.await_termination") as ptr:
            _check("pcclMasterAwaitTermination", ptr)
            self._running = False

    def close(self):
        """Stops the master if it runs, and frees it. Idempotent."""
        with self._state_lock:
            if self._ptr is None:
                return
            if self._busy:
                raise PCCLError(Result.INVALID_USAGE, "MasterNode.close",
                                "a call on this master is still running in another thread")
            ptr, self._ptr = self._ptr, None
        if self._running:
            _fn("pcclInterruptMaster")(ptr)
            _fn("pcclMasterAwaitTermination")(ptr)
            self._running = False
        _check("pcclDestroyMaster", ptr)

    def __del__(self):
        """PCCL's rule: a running master that is dropped without close() (a script whose last
        line is run()) keeps serving until it is interrupted, then is freed; close() and `with`
        stop it at once."""
        try:
            if self._ptr is not None and self._running:
                _fn("pcclMasterAwaitTermination")(self._ptr)
                self._running = False
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return f"MasterNode({self.listen_address!r}{', closed' if self.closed else ''})"
