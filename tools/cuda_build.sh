#!/bin/sh
# cuda_build.sh: the CUDA flavour (--config=cuda) of libpccl and pccl-master into build/cuda/
# (bin/, lib/, include/), beside the host-only flavour in build/. Run by `make`.
# Without nvcc it says so in one line and succeeds: CUDA is optional.
set -eu
cd "$(dirname "$0")/.."
NVCC=/usr/local/cuda/bin/nvcc # fixed by cuda/cuda.bzl
if [ ! -x "$NVCC" ]; then
    echo "cuda: skipped: no nvcc at $NVCC, the CUDA flavour (build/cuda) is not built"
    exit 0
fi
bazel build --config=cuda //:libpccl.so //:libpccl_static $(sed 's|^|//|; s|/\([^/]*\)$|:\1|' tools/binaries.txt)
bin=$(bazel info --config=cuda bazel-bin 2>/dev/null)
rm -rf build/cuda
mkdir -p build/cuda/bin build/cuda/lib build/cuda/include
cp -f "$bin/libpccl.so" "$bin/libpccl.a" build/cuda/lib/
# libpccl.so finds this copy through its RUNPATH $ORIGIN (as in build/lib).
cp -fL "$(/sbin/ldconfig -p | awk '/libuv\.so\.1 .*x86-64/ {print $NF; exit}')" build/cuda/lib/libuv.so.1
for b in $(cat tools/binaries.txt); do cp -f "$bin/$b" build/cuda/bin/; done
cp -f include/pccl.h include/ccoip_inet.h build/cuda/include/
chmod -R u+w build/cuda
echo "built (CUDA flavour): build/cuda/bin build/cuda/lib build/cuda/include"
