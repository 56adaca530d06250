"""`pip install --no-build-isolation` works offline and bundles libpccl.so into the package."""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

import pccl
from conftest import PYTHON_DIR


def have_pip():
    return subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0


@pytest.mark.timeout(180)
def test_offline_install_bundles_the_library(tmp_path):
    if not have_pip():
        pytest.skip("pip is not installed for this python3 (Debian: apt-get install python3-pip)")
    for module, package in (("setuptools", "python3-setuptools"), ("wheel", "python3-wheel")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed for this python3 (Debian: apt-get install {package})")
    src = tmp_path / "src"
    src.mkdir()
    for f in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copyfile(PYTHON_DIR / f, src / f)
    (src / "pccl").mkdir()
    for f in (PYTHON_DIR / "pccl").glob("*.py"):
        shutil.copyfile(f, src / "pccl" / f.name)
    env = dict(os.environ, PCCL_LIBRARY=pccl.library_path(), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    site = tmp_path / "site"
    # --target: a plain directory, so the test touches no system site-packages (PEP 668 allows it).
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-cache-dir",
                        "--target", str(site), str(src)], env=env, capture_output=True, text=True, timeout=170)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (site / "pccl" / "libpccl.so").is_file()
    env.pop("PCCL_LIBRARY")
    env["PYTHONPATH"] = str(site)
    code = ("import pccl, sys; print(pccl.library_path()); print(pccl.is_exported('pcclConnect')); "
            "print('numpy' in sys.modules, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    path, exported, imported = r.stdout.split("\n")[:3]
    assert path == str(site / "pccl" / "libpccl.so")
    assert exported == "True"
    assert imported == "False False"  # import pccl pulls in neither numpy nor torch
