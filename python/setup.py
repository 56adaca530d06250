"""Bundles libpccl.so (and the libuv.so.1 beside it) into the package when one is found at build
time: $PCCL_LIBRARY, else ../build/lib (what `make build` produces). Without one the package
installs alone and finds the library at run time (PCCL_LIBRARY or the system library path)."""
import os
import shutil
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def find_library():
    env = os.environ.get("PCCL_LIBRARY")
    if env:
        p = Path(env)
        p = p / "libpccl.so" if p.is_dir() else p
        if not p.is_file():
            raise SystemExit(f"setup.py: PCCL_LIBRARY={env} is not a file")
        return p
    p = HERE.parent / "build" / "lib" / "libpccl.so"
    return p if p.is_file() else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = find_library()
        dest = Path(self.build_lib) / "pccl"
        if lib is None:
            print("setup.py: no libpccl.so found (run `make build` or set PCCL_LIBRARY); "
                  "installing the package without it")
            return
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, dest / "libpccl.so")
        os.chmod(dest / "libpccl.so", 0o755)
        uv = lib.resolve().parent / "libuv.so.1"
        if uv.is_file():  # libpccl.so's RUNPATH $ORIGIN finds it there
            shutil.copyfile(uv, dest / "libuv.so.1")
        print(f"setup.py: bundled {lib}" + (" and libuv.so.1" if uv.is_file() else ""))


class BinaryDistribution(Distribution):
    """A wheel with a shared library in it is platform-specific."""

    def has_ext_modules(self):
        return find_library() is not None


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
