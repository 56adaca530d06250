# win.mk: the Windows cross build's compile and link steps (mingw-w64), driven by win_build.sh,
# which passes OUT, UV (libuv for Windows), SODIUM (libsodium for Windows), LIB_SRCS (the
# library's sources, from the BUILD files) and XXH (a folder holding xxhash.h). Objects are rebuilt when a header they read changes
# (-MMD). Products: OUT/bin, OUT/lib, OUT/include, and the test clients in OUT/tests.

CC := x86_64-w64-mingw32-gcc
AR := x86_64-w64-mingw32-ar
# -ffp-contract=off as reduce/ has it on Linux: the same IEEE operations give the same bits.
# _WIN32_WINNT 0x0A00: Windows 10 (CancelIoEx, WSAPoll, WaitOnAddress). gnu_printf and
# __USE_MINGW_ANSI_STDIO: msvcrt's printf has no %zu.
# -gdwarf-4: a hung test shows its threads with function, file and line (tests/win/win_unit_test.sh;
# wine 8 reads no DWARF 5, gcc's default: frames without names); the DLL and
# the master that users get are linked stripped (-s).
CFLAGS := -std=c11 -O2 -gdwarf-4 -Wall -Wextra -Werror -D_GNU_SOURCE -D__USE_MINGW_ANSI_STDIO=1 -D_WIN32_WINNT=0x0A00 \
	-DPCCL_BUILDING_SHARED -DXXH_INLINE_ALL -ffp-contract=off -I. -Iinclude -I$(UV)/include -I$(SODIUM)/include -DSODIUM_STATIC -I$(XXH) -MMD -MP
# libuv's and the library's system imports; winpthreads and libgcc linked in statically, so the
# DLL and the executables need only system DLLs.
SYSLIBS := -lws2_32 -lsynchronization -liphlpapi -luserenv -lpsapi -ldbghelp -lole32 -luuid -lshell32 -luser32 -ladvapi32
STATIC_RT := -static-libgcc -Wl,-Bstatic -lwinpthread -Wl,-Bdynamic

OBJ := $(OUT)/obj
LIB_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(LIB_SRCS))
MASTER_OBJ := $(OBJ)/ccoip/master/master_main.o
TEST_OBJS := $(OBJ)/tests/allreduce/ar_peer.o $(OBJ)/tests/allreduce/ar_ref.o $(OBJ)/tests/shared_state/ss_peer.o

# The unit tests that need no Linux-only feature (tests/win/win_unit_test.sh runs them under
# wine): DIR/NAME for tests/DIR/NAME.c; linked statically with the in-memory link.
UNIT_TESTS := reduce/half_test reduce/kernels_test reduce/quant_test reduce/ring_abort_test reduce/ring_big_test \
	reduce/ring_stage_test hash/hash_vectors_test ccoip/codec_test shared_state/ss_codec_test \
	topology/topo_codec_test topology/topo_solver_test master_status/status_render_test threadpark/monocond_test
UNIT_EXES := $(foreach t,$(UNIT_TESTS),$(OUT)/tests/unit/$(notdir $(t)).exe)
MEMLINK := $(OBJ)/reduce/reduce_memlink.o $(OBJ)/threadpark/monocond_win32.o
EXTRA_hash_vectors_test := $(OBJ)/tests/hash/simple_naive.o
TEST_OBJS += $(MEMLINK) $(EXTRA_hash_vectors_test) $(foreach t,$(UNIT_TESTS),$(OBJ)/tests/$(t).o)

all: $(UNIT_EXES) $(OUT)/lib/libpccl.a $(OUT)/lib/pccl.dll $(OUT)/bin/pccl-master.exe $(OUT)/tests/ar_peer.exe \
	$(OUT)/tests/ss_peer.exe $(OUT)/include/pccl.h $(OUT)/include/ccoip_inet.h $(OUT)/include/pccl_profiler.h

# Objects also depend on this file: a change of flags rebuilds them.
$(OBJ)/%.o: %.c tools/win.mk
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(OUT)/lib/libpccl.a: $(LIB_OBJS) $(OUT)/lib/libuv.a $(OUT)/lib/libsodium.a
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $(LIB_OBJS)

# Beside the static library, which needs them (the DLL and the executables carry their own copy).
$(OUT)/lib/libuv.a: $(UV)/lib/libuv.a
	@mkdir -p $(dir $@)
	cp -f $< $@

$(OUT)/lib/libsodium.a: $(SODIUM)/lib/libsodium.a
	@mkdir -p $(dir $@)
	cp -f $< $@

# Only PCCL_EXPORT functions leave the DLL (any dllexport switches off exporting everything).
$(OUT)/lib/pccl.dll: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -s -o $@ $(LIB_OBJS) -Wl,--out-implib,$(OUT)/lib/libpccl.dll.a $(UV)/lib/libuv.a $(SODIUM)/lib/libsodium.a $(STATIC_RT) $(SYSLIBS)

$(OUT)/bin/pccl-master.exe: $(MASTER_OBJ) $(OUT)/lib/libpccl.a
	@mkdir -p $(dir $@)
	$(CC) -static -s -o $@ $(MASTER_OBJ) $(OUT)/lib/libpccl.a $(UV)/lib/libuv.a $(SODIUM)/lib/libsodium.a -lwinpthread $(SYSLIBS)

# The test clients: ar_peer through the DLL (public API only), ss_peer statically (it also uses
# internal helpers).
$(OUT)/tests/ar_peer.exe: $(OBJ)/tests/allreduce/ar_peer.o $(OBJ)/tests/allreduce/ar_ref.o $(OUT)/lib/pccl.dll
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(OBJ)/tests/allreduce/ar_peer.o $(OBJ)/tests/allreduce/ar_ref.o $(OUT)/lib/libpccl.dll.a $(STATIC_RT)
	cp -f $(OUT)/lib/pccl.dll $(OUT)/tests/

$(OUT)/tests/ss_peer.exe: $(OBJ)/tests/shared_state/ss_peer.o $(OUT)/lib/libpccl.a
	@mkdir -p $(dir $@)
	$(CC) -static -o $@ $< $(OUT)/lib/libpccl.a $(UV)/lib/libuv.a $(SODIUM)/lib/libsodium.a -lwinpthread $(SYSLIBS)

define unit_rule
$(OUT)/tests/unit/$(notdir $(1)).exe: $(OBJ)/tests/$(1).o $(MEMLINK) $(EXTRA_$(notdir $(1))) $(OUT)/lib/libpccl.a
	@mkdir -p $$(dir $$@)
	$(CC) -static -o $$@ $$< $(MEMLINK) $(EXTRA_$(notdir $(1))) $(OUT)/lib/libpccl.a $(UV)/lib/libuv.a $(SODIUM)/lib/libsodium.a -lwinpthread $(SYSLIBS)
endef
$(foreach t,$(UNIT_TESTS),$(eval $(call unit_rule,$(t))))

$(OUT)/include/%.h: include/%.h
	@mkdir -p $(dir $@)
	cp -f $< $@

-include $(LIB_OBJS:.o=.d) $(MASTER_OBJ:.o=.d) $(TEST_OBJS:.o=.d)
