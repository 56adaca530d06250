# Makefile: the front door. Every target installs what it needs first (tools/deps.sh), then
# drives Bazel; products land in build/ (bin/, lib/, include/).

PREFIX ?= /usr/local
VERSION := 0.1.0
BAZEL ?= bazel
DEPS := sh tools/deps.sh

.PHONY: all build windows deps test test-asan test-tsan bench install demo fuzz clean gpu-pack test-gpu bench-gpu chaos

all: build

deps:
	@$(DEPS)

build: deps
	$(BAZEL) build //...
	@rm -rf build/bin build/lib build/include
	@mkdir -p build/bin build/lib build/include
	@cp -f bazel-bin/libpccl.so bazel-bin/libpccl.a build/lib/
	@# libpccl.so finds this copy through its RUNPATH $$ORIGIN (for machines without libuv1).
	@cp -fL $$(/sbin/ldconfig -p | awk '/libuv\.so\.1 .*x86-64/ {print $$NF; exit}') build/lib/libuv.so.1
	@chmod u+w build/lib/*
	@for b in $$(cat tools/binaries.txt); do cp -f bazel-bin/$$b build/bin/ && chmod u+w build/bin/$$(basename $$b); done
	@cp -f include/pccl.h include/ccoip.h include/ccoip_inet.h include/pccl_profiler.h build/include/
	@echo "built: build/bin build/lib build/include"
	@# The CUDA flavour into build/cuda/ when nvcc is there (one skip line when it is not).
	@sh tools/cuda_build.sh

# Windows (x86-64), cross-built with mingw-w64 into build/win/ (bin/, lib/, include/ as above;
# tests/ holds the test clients the wine tests run). docs/platforms.md says how and why.
windows: deps
	@sh tools/win_build.sh build/win

# The CUDA flavour's tests first (compiled even without a GPU; skipped without nvcc), so that
# the last line stays the summary of every other test.
test: build windows
	@sh tools/cuda_tests.sh; c=$$?; sh tools/run_tests.sh; r=$$?; [ $$c -eq 0 ] && [ $$r -eq 0 ]

test-asan: deps
	@sh tools/run_tests.sh --config=asan --test_tag_filters=-nosan --build_tag_filters=-nosan

test-tsan: deps
	@sh tools/run_tests.sh --config=tsan --test_tag_filters=-nosan --build_tag_filters=-nosan

bench: build
	@sh bench/run.sh

demo: build
	@sh tools/demo.sh

# The long chaos run (issue 15; docs/chaos.md): 8 peers x 500 steps, 2 x 16 MiB of shared state,
# 4 x 4 MiB all-reduces, a fault every ~10 steps; one summary line per seed (CHAOS_SEEDS).
CHAOS_SEEDS ?= 1
chaos: build
	@$(BAZEL) build //tests/chaos:chaos_peer
	@# bazel-bin may point at another flavour's outputs (the CUDA build runs last): ask Bazel.
	@peer=$$($(BAZEL) info bazel-bin)/tests/chaos/chaos_peer; \
	for s in $(CHAOS_SEEDS); do /usr/bin/python3 -B tests/chaos/chaos.py --master build/bin/pccl-master \
		--peer $$peer --peers 8 --steps 500 --seed $$s --state-floats 4194304 \
		--reduce-floats 1048576 --fault-every 10 --stop-max-s 5 --hang-s 120 --master-kills || exit 1; done
	@# The master restart soak with more kills than the test's 40 (issue 29).
	@$(BAZEL) build //tests/restart:soak_test
	@bin=$$($(BAZEL) info bazel-bin); $$bin/tests/restart/soak_test build/bin/pccl-master $$bin/tests/restart/restart_peer 200 800

fuzz: deps
	FUZZ_SECONDS=$${FUZZ_SECONDS:-300} $(BAZEL) run //tests/ccoip/fuzz:fuzz

# GPU tests and benchmarks: built here into build/gpu/ (tools/gpu_pack.sh), run from there. On a
# GPU machine without Bazel or nvcc, `make test-gpu` / `make bench-gpu` run the packed folder
# carried over (or call sh build/gpu/run_tests.sh, sh build/gpu/run_bench.sh directly).
gpu-pack: deps
	@sh tools/gpu_pack.sh

test-gpu:
	@if command -v $(BAZEL) >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then $(MAKE) --no-print-directory gpu-pack; fi
	@sh build/gpu/run_tests.sh

bench-gpu:
	@if command -v $(BAZEL) >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then $(MAKE) --no-print-directory gpu-pack; fi
	@sh build/gpu/run_bench.sh bench/out

install: build
	sh tools/install.sh $(DESTDIR)$(PREFIX) build $(VERSION)

clean:
	$(BAZEL) clean
	rm -rf build bench/out
