"""Enum values and struct layouts against pccl.h; PCCLError and its subclasses."""
import ctypes
import pickle
import re

import pytest

import pccl
from pccl import _native
from conftest import REPO

HEADER = REPO / "include" / "pccl.h"


def header_enums():
    """{C enum type name: {member: value}} parsed from pccl.h."""
    text = HEADER.read_text()
    out = {}
    for body, name in re.findall(r"typedef enum \w+ \{(.*?)\} (\w+);", text, re.S):
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        members = {}
        for m in re.finditer(r"(\w+)\s*=\s*(\d+)", body):
            members[m.group(1)] = int(m.group(2))
        out[name] = members
    return out


PY_ENUMS = {
    "pcclResult_t": (pccl.Result, lambda c: re.sub(r"(?<!^)(?=[A-Z])", "_", c[len("pccl"):]).upper()),
    "pcclDataType_t": (pccl.DataType, None),
    "pcclDeviceType_t": (pccl.DeviceType, lambda c: c[len("pcclDevice"):].upper()),
    "pcclRedOp_t": (pccl.ReduceOp, lambda c: c[len("pccl"):].upper()),
    "pcclAttribute_t": (pccl.Attribute, lambda c: c[len("PCCL_ATTRIBUTE_"):]),
    "pcclSharedStateSyncStrategy_t": (pccl.SharedStateSyncStrategy,
                                      lambda c: c[len("PCCL_SHARED_STATE_SYNC_STRATEGY_"):]),
    "pcclDistributionHint_t": (pccl.DistributionHint, lambda c: c[len("pcclDistribution"):].upper()),
    "pcclQuantizationAlgorithm_t": (pccl.QuantizationAlgorithm, None),
}
DATATYPE_NAMES = {"pcclUint8": "UINT8", "pcclInt8": "INT8", "pcclInt16": "INT16", "pcclUint16": "UINT16",
                  "pcclUint32": "UINT32", "pcclInt32": "INT32", "pcclUint64": "UINT64", "pcclInt64": "INT64",
                  "pcclFloat16": "FLOAT16", "pcclBFloat16": "BFLOAT16", "pcclFloat": "FLOAT",
                  "pcclDouble": "DOUBLE"}
QUANT_NAMES = {"pcclQuantNone": "NONE", "pcclQuantMinMax": "MIN_MAX", "pcclQuantZeroPointScale": "ZERO_POINT_SCALE"}


@pytest.mark.parametrize("c_name", sorted(PY_ENUMS))
def test_enum_values_match_header(c_name):
    members = header_enums()[c_name]
    cls, rename = PY_ENUMS[c_name]
    rename = rename or (DATATYPE_NAMES.get if cls is pccl.DataType else QUANT_NAMES.get)
    assert members, c_name
    expected = {rename(k): v for k, v in members.items()}
    # Every C member by its name (aliases included), and nothing else.
    assert {n: cls.__members__[n].value for n in expected if n in cls.__members__} == expected
    assert {m.value for m in cls} == set(members.values())
    assert len(cls) == len(members)


def test_attribute_local_world_size_alias():
    assert pccl.Attribute.LOCAL_WORLD_SIZE is pccl.Attribute.PEER_GROUP_WORLD_SIZE
    assert pccl.Attribute.LOCAL_WORLD_SIZE.value == 2


def test_all_twelve_datatypes_and_itemsizes():
    assert len(pccl.DataType) == 12
    sizes = {"UINT8": 1, "INT8": 1, "INT16": 2, "UINT16": 2, "UINT32": 4, "INT32": 4, "UINT64": 8, "INT64": 8,
             "FLOAT16": 2, "BFLOAT16": 2, "FLOAT": 4, "DOUBLE": 8}
    assert {d.name: d.itemsize for d in pccl.DataType} == sizes


def test_device_type_from_torch_device_type():
    assert pccl.DeviceType.from_torch_device_type("cpu") is pccl.DeviceType.CPU
    assert pccl.DeviceType.from_torch_device_type("cuda") is pccl.DeviceType.CUDA
    assert pccl.DeviceType.from_torch_device_type("meta") is None


# x86-64 layout, the same numbers as tests/api/layout_test.c checks for the C header.
LAYOUT = [
    (_native.InetAddress, 24, {"protocol": 0, "ipv4": 4, "ipv6": 8}),
    (_native.SocketAddress, 28, {"inet": 0, "port": 24}),
    (_native.CommCreateParams, 36, {"master_address": 0, "peer_group": 28, "p2p_connection_pool_size": 32}),
    (_native.ReduceInfoC, 24, {"local_world_size": 0, "tx_bytes": 8, "rx_bytes": 16}),
    (_native.ReduceOperandDescriptorC, 8, {"datatype": 0, "distribution_hint": 4}),
    (_native.QuantizationOptionsC, 8, {"quantized_datatype": 0, "algorithm": 4}),
    (_native.ReduceDescriptorC, 40, {"count": 0, "op": 8, "tag": 16, "src_descriptor": 24,
                                     "quantization_options": 32}),
    (_native.ReduceOpDescriptorC, 56, {"sendbuf": 0, "recvbuf": 8, "descriptor": 16}),
    (_native.AsyncReduceOpC, 16, {"comm": 0, "tag": 8}),
    (_native.TensorInfoC, 40, {"name": 0, "data": 8, "count": 16, "datatype": 24, "device_type": 28,
                               "allow_content_inequality": 32}),
    (_native.SharedStateC, 24, {"revision": 0, "count": 8, "infos": 16}),
    (_native.SharedStateSyncInfoC, 16, {"tx_bytes": 0, "rx_bytes": 8}),
    (_native.BuildInfoC, 1, {"has_cuda_support": 0}),
]


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="layout numbers are for 64-bit")
@pytest.mark.parametrize("struct,size,offsets", LAYOUT, ids=[s[0].__name__ for s in LAYOUT])
def test_struct_layout(struct, size, offsets):
    assert ctypes.sizeof(struct) == size
    assert {name: getattr(struct, name).offset for name in offsets} == offsets


def test_every_header_function_has_a_prototype():
    declared = set(re.findall(r"PCCL_EXPORT [\w\s\*]*?\b(pccl\w+)\(", HEADER.read_text()))
    assert declared == set(_native.PROTOTYPES)


def test_pcclerror_carries_result():
    e = pccl.PCCLError(6, "pcclConnect")
    assert e.result is pccl.Result.MASTER_CONNECTION_FAILED
    assert e.code == 6 and e.func_name == "pcclConnect"
    assert "pcclConnect" in str(e) and "MASTER_CONNECTION_FAILED" in str(e)
    assert isinstance(e, Exception)
    e2 = pccl.PCCLError(pccl.Result.INVALID_USAGE, "f", "why")
    assert str(e2).endswith(": why") and e2.detail == "why"


def test_pcclerror_check():
    pccl.PCCLError.check(0, "f")
    pccl.PCCLError.check(pccl.Result.SUCCESS, "f")
    for r in pccl.Result:
        if r is not pccl.Result.SUCCESS:
            with pytest.raises(pccl.PCCLError) as ei:
                pccl.PCCLError.check(r.value, "f")
            assert ei.value.result is r


def test_pcclerror_unknown_code_keeps_int():
    e = pccl.PCCLError(123, "f")
    assert e.result == 123 and not isinstance(e.result, pccl.Result)
    assert "123" in str(e)


def test_result_is_int_comparable():
    assert pccl.Result.SUCCESS == 0 and pccl.Result(8) is pccl.Result.RANK_CONNECTION_LOST


def test_errors_pickle():
    for e in (pccl.PCCLError(8, "pcclAllReduce", "x"), pccl.PCCLArgumentError("f", "bad"),
              pccl.PCCLNotExportedError("pcclX", "/lib.so")):
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is type(e) and str(e2) == str(e) and e2.code == e.code


def test_argument_error_is_value_error():
    e = pccl.PCCLArgumentError("f", "bad")
    assert isinstance(e, ValueError) and isinstance(e, pccl.PCCLError)
    assert e.result is pccl.Result.INVALID_ARGUMENT


def test_not_exported_error_names_symbol():
    e = pccl.PCCLNotExportedError("pcclFoo", "/x/libpccl.so")
    assert e.symbol == "pcclFoo" and "pcclFoo" in str(e) and "/x/libpccl.so" in str(e)
    assert isinstance(e, pccl.PCCLError) and e.result is pccl.Result.INTERNAL_ERROR


def test_library_info():
    assert pccl.library_path().endswith("libpccl.so")
    info = pccl.build_info()
    assert set(info) == {"has_cuda_support"} and isinstance(info["has_cuda_support"], bool)
    assert pccl.is_exported("pcclInit") and pccl.is_exported("pcclConnect")
    with pytest.raises(pccl.PCCLArgumentError):
        pccl.is_exported("printf")


def test_missing_symbol_lookup_raises():
    lib = _native.library()
    with pytest.raises(_native.SymbolMissing) as ei:
        lib.fn("pcclNoSuchFunction")
    assert ei.value.name == "pcclNoSuchFunction" and ei.value.path == pccl.library_path()
    assert not lib.has("pcclNoSuchFunction")


def test_library_refuses_calls_before_pcclInit():
    """NOT_INITIALIZED cannot happen through the package (import pccl calls pcclInit); a bare
    process that loads the library shows the code it would map."""
    import subprocess
    import sys
    code = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); p = ctypes.c_void_p(); "
            "print(lib.pcclCreateCommunicator(None, ctypes.byref(p)))")
    r = subprocess.run([sys.executable, "-c", code, pccl.library_path()], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    code_value = int(r.stdout)
    assert code_value == pccl.Result.NOT_INITIALIZED
    assert pccl.PCCLError(code_value, "pcclCreateCommunicator").result is pccl.Result.NOT_INITIALIZED
