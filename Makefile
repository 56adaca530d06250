# Makefile: the front door. Every target installs what it needs first (tools/deps.sh), then
# drives Bazel; products land in build/ (bin/, lib/, include/).

PREFIX ?= /usr/local
VERSION := 0.1.0
BAZEL ?= bazel
DEPS := sh tools/deps.sh

.PHONY: all build deps test test-asan test-tsan bench install demo fuzz clean

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
	@cp -f include/pccl.h include/ccoip_inet.h build/include/
	@echo "built: build/bin build/lib build/include"

test: build
	@sh tools/run_tests.sh

test-asan: deps
	@sh tools/run_tests.sh --config=asan --test_tag_filters=-nosan --build_tag_filters=-nosan

test-tsan: deps
	@sh tools/run_tests.sh --config=tsan --test_tag_filters=-nosan --build_tag_filters=-nosan

bench: build
	@sh bench/run.sh

install: build
	sh tools/install.sh $(DESTDIR)$(PREFIX) build $(VERSION)

clean:
	$(BAZEL) clean
	rm -rf build bench/out
