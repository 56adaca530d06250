"""pccl.determinism_fingerprint (pcclGetDeterminismFingerprint) without a GPU: the CPU reference of
the quick input set has the eight IEEE-exact functions, equal to what pccl-fingerprint --cpu
--quick prints (the same library code); unknown combinations need a GPU or raise."""
import pytest

import pccl


def test_cpu_quick_reference():
    fp = pccl.determinism_fingerprint(quick=True, cpu=True)
    assert fp["device"] == "cpu" and fp["flags"] == 3
    assert list(fp["hashes"]) == ["sqrtf", "rcpf", "f32_to_f16", "f32_to_bf16", "f16_to_f32", "bf16_to_f32",
                                  "fma_dot256", "tree_sum1024"]
    assert fp["hashes"]["tree_sum1024"] == 0xe2e86a7220413241  # as on the H100 (docs/fingerprint.md)


def test_gpu_fingerprint_needs_a_gpu():
    if pccl.build_info()["has_cuda_support"]:
        pytest.skip("CUDA flavour: the GPU fingerprint may work here")
    with pytest.raises(pccl.PCCLError):
        pccl.determinism_fingerprint(quick=True)
