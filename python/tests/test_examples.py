"""The examples under examples/python run to their own success check (each skips while the
library lacks a function it needs)."""
import subprocess
import sys

import pytest

from conftest import REPO, needs, peer_env

EXAMPLES = REPO / "examples" / "python"


def run_example(name, *args, timeout=240):
    p = subprocess.run([sys.executable, str(EXAMPLES / name), *args], env=peer_env(PCCL_LOG_LEVEL="error"),
                       capture_output=True, text=True, timeout=timeout, start_new_session=True)
    assert p.returncode == 0, f"{name} exited {p.returncode}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p.stdout


@pytest.mark.timeout(150)
def test_hello_all_reduce():
    needs("pcclAllReduce")
    out = run_example("hello_all_reduce.py", "--peers", "3", timeout=120)
    assert out.count("numpy SUM -> 6 (expected 6)") == 3 and "all peers agree" in out


@pytest.mark.timeout(300)
def test_mlp_digits_kill_and_leave_without_shared_state():
    """What runs before pcclSynchronizeSharedState exists: four peers from one seed, one killed,
    one leaving; the two that finish hold bit-identical models."""
    needs("pcclAllReduce")
    out = run_example("mlp_digits.py", "--no-shared-state", "--steps", "200", "--kill-at", "40", "--leave-at", "140",
                      "--step-delay", "0.01", "--min-accuracy", "0.8", "--timeout", "240", timeout=270)
    assert "launcher: OK" in out and "killing peer 1" in out and "leaving at step 140" in out


@pytest.mark.timeout(300)
def test_mlp_digits_with_churn():
    needs("pcclAllReduce", "pcclSynchronizeSharedState")
    out = run_example("mlp_digits.py", "--steps", "200", "--kill-at", "40", "--join-at", "70", "--leave-at", "140",
                      "--timeout", "240", timeout=270)
    assert "launcher: OK" in out


@pytest.mark.timeout(300)
def test_diloco():
    """pccl.diloco: a peer SIGKILLed, a newcomer joining; every peer ends with the same outer model
    (the matrix of fragments, delay and compression runs in //python:diloco_test)."""
    needs("pcclAllReduce", "pcclSynchronizeSharedState")
    out = run_example("diloco.py", "--timeout", "240", timeout=270)
    assert "launcher: OK" in out and "killing peer 2" in out and "peer 3 connects" in out
