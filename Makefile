# qtts build. `make` builds the library and tools into build/, `make test`
# builds and runs every test, `make debug` builds with ASan + UBSan into
# build-debug/, `make debug-test` runs the tests there.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
PKGS    := libpcre2-8 libutf8proc jansson sndfile soxr
# the HTTP server's extra dependencies (lame has no pkg-config file: checked by header)
SERVER_PKGS := libmicrohttpd libopusenc opus rubberband
DEB_libmicrohttpd := libmicrohttpd-dev
DEB_libopusenc := libopusenc-dev
DEB_opus := libopus-dev
DEB_rubberband := librubberband-dev
# Debian package that provides each pkg-config module, for the error message.
DEB_libpcre2-8 := libpcre2-dev
DEB_libutf8proc := libutf8proc-dev
DEB_jansson := libjansson-dev
DEB_sndfile := libsndfile1-dev
DEB_soxr := libsoxr-dev

MISSING := $(strip $(foreach p,$(PKGS) $(SERVER_PKGS),$(if $(shell pkg-config --exists $(p) && echo y),,$(p))))
ifeq ($(wildcard /usr/include/lame/lame.h),)
MISSING += lame
DEB_lame := libmp3lame-dev
endif
ifneq ($(MISSING),)
ifeq ($(filter help clean,$(MAKECMDGOALS)),)
$(error missing build dependencies: $(MISSING). Install with: apt-get install $(foreach p,$(MISSING),$(DEB_$(p))) (or run scripts/install-deps.sh))
endif
endif

DEP_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
DEP_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
SERVER_CFLAGS := $(shell pkg-config --cflags $(SERVER_PKGS) 2>/dev/null)
SERVER_LIBS   := $(shell pkg-config --libs $(SERVER_PKGS) 2>/dev/null) -lmp3lame

WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
CFLAGS  ?=
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -g $(WARN) $(SAN) -Iinclude -Isrc $(DEP_CFLAGS) $(CFLAGS)
LDLIBS  := $(DEP_LIBS) -lm -lpthread
ALL_LDFLAGS := $(SAN) $(LDFLAGS)

LIB_SRC   := $(shell find src -name '*.c' | sort)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_SRC   := $(shell find tools/cli -name '*.c' | sort)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
# tools/common: what more than one tool links (the load generator and its
# HTTP client: qtts-server --loadgen and qtts-bench server)
COMMON_SRC := $(shell find tools/common -name '*.c' 2>/dev/null | sort)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
SERVER_SRC := $(shell find tools/server -name '*.c' 2>/dev/null | sort)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o) $(COMMON_OBJ)
SERVER_LIB_OBJ := $(filter-out $(BUILD)/obj/tools/server/main.o,$(SERVER_OBJ))
BENCH_SRC := $(shell find tools/bench -name '*.c' 2>/dev/null | sort)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
# bench objects other than main.c, for tests/bench/ tests
BENCH_LIB_OBJ := $(filter-out $(BUILD)/obj/tools/bench/main.o,$(BENCH_OBJ))
TCOMMON_SRC := $(wildcard tests/common/*.c)
TCOMMON_OBJ := $(TCOMMON_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c tests/golden/test_*.c tests/bench/test_*.c tests/server/test_*.c))
TEST_BIN  := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
UNIT_BIN  := $(filter $(BUILD)/tests/unit/%,$(TEST_BIN))
TEST_SCRIPTS := $(sort $(wildcard tests/scripts/test_*.sh tests/server/test_*.sh tests/bench/test_*.sh))
# the AVX-512 kernels under Bochs (minutes of emulation): make test only
EMU_TESTS := tests/emu/test_avx512_bochs.sh

.PHONY: all test test-unit kbench debug debug-test tsan-test clean deps
all: $(BUILD)/libqtts.a $(BUILD)/qtts $(if $(BENCH_SRC),$(BUILD)/qtts-bench) $(if $(SERVER_SRC),$(BUILD)/qtts-server)

# Per-ISA kernel files get their instruction-set flags; everything else is
# built for the baseline ISA, and ops_dispatch picks a kernel at run time.
ARCH := $(shell uname -m)
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mfma -mf16c
ifneq ($(ARCH),x86_64)
LIB_SRC := $(filter-out %_avx2.c %_avx512.c,$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
endif
ifneq ($(ARCH),aarch64)
LIB_SRC := $(filter-out %_neon.c,$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
endif
isa_flags = $(if $(filter %_avx2.c,$<),$(ISA_avx2),$(if $(filter %_avx512.c,$<),$(ISA_avx512)))

# The Vulkan backend, built when the loader's headers (libvulkan-dev) and
# glslc are present, unless `make VULKAN=0`; else src/backend/vulkan/vk_stub.c
# stands in and the backend reports how to get it. Every
# src/backend/vulkan/shaders/*.comp becomes SPIR-V in $(BUILD)/shaders/ and
# the generated table $(BUILD)/shaders/vk_shaders.c embeds it in the library.
VULKAN ?= auto
VK_DIR := src/backend/vulkan
VK_SHADER_DIR := $(VK_DIR)/shaders
ifneq ($(VULKAN),0)
HAVE_VULKAN := $(shell pkg-config --exists vulkan && command -v glslc >/dev/null 2>&1 && echo y)
endif
ifeq ($(HAVE_VULKAN),y)
LIB_SRC := $(filter-out $(VK_DIR)/vk_stub.c,$(LIB_SRC))
ALL_CFLAGS += -DQTTS_HAVE_VULKAN $(shell pkg-config --cflags vulkan)
LDLIBS += $(shell pkg-config --libs vulkan)
GLSLC ?= glslc
SHADER_NAMES := $(sort $(patsubst $(VK_SHADER_DIR)/%.comp,%,$(wildcard $(VK_SHADER_DIR)/*.comp)))
SHADER_INC := $(SHADER_NAMES:%=$(BUILD)/shaders/%.inc)
VK_SHADERS_OBJ := $(BUILD)/obj/shaders/vk_shaders.o
else
LIB_SRC := $(filter-out $(filter-out $(VK_DIR)/vk_stub.c,$(wildcard $(VK_DIR)/*.c)),$(LIB_SRC))
VK_SHADERS_OBJ :=
ifneq ($(VULKAN),0)
$(info note: building without the Vulkan backend (to add it: apt-get install libvulkan-dev glslc))
endif
endif
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(VK_SHADERS_OBJ)

$(BUILD)/shaders/%.inc: $(VK_SHADER_DIR)/%.comp $(wildcard $(VK_SHADER_DIR)/*.glsl)
	@mkdir -p $(dir $@)
	$(GLSLC) --target-env=vulkan1.2 -O -I $(VK_SHADER_DIR) -mfmt=c -o $@.tmp $< && mv $@.tmp $@

# the table of every shader, sorted by name (vk_shaders.h); the folder is a
# prerequisite so that adding or removing a shader regenerates it
$(BUILD)/shaders/vk_shaders.c: $(SHADER_INC) $(VK_SHADER_DIR) Makefile
	@mkdir -p $(dir $@)
	@{ echo '/* Generated by the Makefile: the SPIR-V of every shader in $(VK_SHADER_DIR). */'; \
	  echo '#include "backend/vulkan/vk_shaders.h"'; \
	  i=0; for n in $(SHADER_NAMES); do \
	    printf 'static const uint32_t spv_%d[] =\n#include "%s.inc"\n;\n' $$i $$n; i=$$((i + 1)); done; \
	  echo 'static const vk_shader_spirv table[] = {'; \
	  i=0; for n in $(SHADER_NAMES); do \
	    printf '    {"%s", spv_%d, sizeof spv_%d / sizeof spv_%d[0]},\n' $$n $$i $$i $$i; i=$$((i + 1)); done; \
	  echo '};'; \
	  echo 'const vk_shader_spirv *vk_shader_table(size_t *n) {'; \
	  echo '    *n = sizeof table / sizeof table[0];'; \
	  echo '    return table;'; \
	  echo '}'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/shaders/vk_shaders.o: $(BUILD)/shaders/vk_shaders.c $(VK_DIR)/vk_shaders.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(isa_flags) $(if $(filter tools/server/%,$<),$(SERVER_CFLAGS)) -MMD -MP -c $< -o $@

# libqtts.a exports only the public qtts_* symbols: the objects are linked
# into one relocatable object and every other global is made local, so the
# library's internal names can never clash with a program's. The tests, which
# reach internal functions through src/ headers, link libqtts-internal.a.
$(BUILD)/libqtts-internal.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libqtts.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(LD) -r -o $(BUILD)/libqtts.o $^
	objcopy -w --keep-global-symbol='qtts_*' $(BUILD)/libqtts.o
	rm -f $@ && ar rcs $@ $(BUILD)/libqtts.o

$(BUILD)/qtts: $(CLI_OBJ) $(BUILD)/libqtts.a
	$(CC) $(ALL_LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libqtts.a $(LDLIBS)

# qtts-bench server is the load generator of tools/common (an HTTP client: no
# server libraries; it reads /metrics with the server's metrics.c)
LOADGEN_OBJ := $(COMMON_OBJ) $(BUILD)/obj/tools/server/metrics.o
$(BUILD)/qtts-bench: $(BENCH_OBJ) $(LOADGEN_OBJ) $(BUILD)/libqtts.a
	$(CC) $(ALL_LDFLAGS) -o $@ $(BENCH_OBJ) $(LOADGEN_OBJ) $(BUILD)/libqtts.a $(LDLIBS)

$(BUILD)/qtts-server: $(SERVER_OBJ) $(BUILD)/libqtts.a
	$(CC) $(ALL_LDFLAGS) -o $@ $(SERVER_OBJ) $(BUILD)/libqtts.a $(SERVER_LIBS) $(LDLIBS)

# tests of the server link its objects (all but main.c)
$(BUILD)/tests/server/%: tests/server/%.c $(TCOMMON_OBJ) $(SERVER_LIB_OBJ) $(BUILD)/libqtts-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SERVER_CFLAGS) -Itests/common -Itools/server -Itools/common -MMD -MP -o $@ $< $(TCOMMON_OBJ) $(SERVER_LIB_OBJ) $(BUILD)/libqtts-internal.a $(SERVER_LIBS) $(LDLIBS)

# tests of the bench tool link its objects (all but main.c)
$(BUILD)/tests/bench/%: tests/bench/%.c $(TCOMMON_OBJ) $(BENCH_LIB_OBJ) $(BUILD)/libqtts-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/common -Itools/bench -MMD -MP -o $@ $< $(TCOMMON_OBJ) $(BENCH_LIB_OBJ) $(BUILD)/libqtts-internal.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TCOMMON_OBJ) $(BUILD)/libqtts-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/common -MMD -MP -o $@ $< $(TCOMMON_OBJ) $(BUILD)/libqtts-internal.a $(LDLIBS)

# The public header must compile as C++ too.
$(BUILD)/tests/header_cxx.o: include/qtts.h
	@mkdir -p $(dir $@)
	printf '#include "qtts.h"\nint main(void){return qtts_status_str(QTTS_OK)==0;}\n' > $(BUILD)/tests/header_cxx.cpp
	$(CXX) -Wall -Wextra -Werror -Iinclude -c $(BUILD)/tests/header_cxx.cpp -o $@

tests: $(TEST_BIN) $(BUILD)/tests/header_cxx.o $(BUILD)/qtts

test: all tests
	@BUILD=$(BUILD) sh tests/run_tests.sh $(EMU_TESTS) $(TEST_BIN) $(TEST_SCRIPTS)

# the unit tests alone (tests/unit: kernels, ops, parsers; no model run), in
# seconds
test-unit: $(UNIT_BIN)
	@BUILD=$(BUILD) sh tests/run_tests.sh $(UNIT_BIN)

# the kernel micro-benchmark (tests/bench/kbench.c: no assertion, not a test)
kbench: $(BUILD)/kbench
$(BUILD)/kbench: tests/bench/kbench.c $(BUILD)/libqtts-internal.a
	$(CC) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libqtts-internal.a $(LDLIBS)

debug:
	$(MAKE) BUILD=build-debug OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" all tests

# The Vulkan loader unloads the driver at vkDestroyInstance, and lavapipe's
# allocations held by its globals then look leaked (from an unknown module,
# which no suppression can name): the tests run with the lavapipe driver
# preloaded so it stays mapped, and tests/lsan.supp covers leaks inside
# driver libraries that LeakSanitizer can name.
LVP_ICD := $(firstword $(wildcard /usr/share/vulkan/icd.d/lvp_icd.*.json))
LVP_LIB := $(if $(LVP_ICD),$(shell sed -n 's/.*"library_path": *"\([^"]*\)".*/\1/p' $(LVP_ICD)))
DEBUG_TEST_ENV := LSAN_OPTIONS="suppressions=$(CURDIR)/tests/lsan.supp$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}" \
	$(if $(and $(filter y,$(HAVE_VULKAN)),$(wildcard $(LVP_LIB))),LD_PRELOAD="$(LVP_LIB)" \
	ASAN_OPTIONS="verify_asan_link_order=0$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}")
debug-test:
	$(MAKE) BUILD=build-debug OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" all tests
	@$(DEBUG_TEST_ENV) BUILD=build-debug sh tests/run_tests.sh $(patsubst tests/%.c,build-debug/tests/%,$(TEST_SRC)) $(TEST_SCRIPTS)

# The server's engine and HTTP tests under ThreadSanitizer (data races
# between the engine thread, the decode threads and the HTTP threads), the
# pipeline's (decode threads beside generation, a pool worker parked for
# them; several streams batched), and one model shared by four threads
# (tokenizing, making contexts, synthesizing).
TSAN_SAN := -fsanitize=thread -fno-omit-frame-pointer
TSAN_TESTS := $(addprefix build-tsan/tests/server/,test_sched test_server test_load) \
	$(addprefix build-tsan/tests/golden/,test_pipeline test_batch test_shared_model test_incremental)
tsan-test:
	$(MAKE) BUILD=build-tsan OPT=-O1 SAN="$(TSAN_SAN)" $(TSAN_TESTS)
	@TSAN_OPTIONS="$${TSAN_OPTIONS:-halt_on_error=1}" BUILD=build-tsan sh tests/run_tests.sh $(TSAN_TESTS)

# Fuzzing (tests/fuzz, docs/TESTING.md "Fuzzing"): one libFuzzer target per
# input surface, tests/fuzz/fuzz_<target>.c. `make test` builds each with
# tests/fuzz/replay.c as $(BUILD)/tests/fuzz/fuzz_<target> and replays its seed
# corpus and every kept finding (tests/fuzz/{corpus,regress}/<target>);
# `make fuzz FUZZ_SECONDS=N` builds them with clang's libFuzzer + ASan + UBSan
# into build-fuzz/ and runs each for N seconds (tests/fuzz/run.sh).
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_REPLAY_BIN := $(FUZZ_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_DEP_OBJ := $(SERVER_LIB_OBJ) $(BUILD)/obj/tools/cli/codes_file.o
FUZZ_LINK = $(ALL_CFLAGS) $(SERVER_CFLAGS) -Itests/fuzz -Itools/server -Itools/common -Itools/cli
TEST_SRC += $(FUZZ_SRC)
TEST_BIN += $(FUZZ_REPLAY_BIN)
tests: $(FUZZ_REPLAY_BIN)
$(BUILD)/tests/fuzz/%: tests/fuzz/%.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_DEP_OBJ) $(BUILD)/libqtts-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_LINK) -DFUZZ_TARGET='"$(*:fuzz_%=%)"' -o $@ $< tests/fuzz/replay.c $(FUZZ_DEP_OBJ) $(BUILD)/libqtts-internal.a $(SERVER_LIBS) $(LDLIBS)
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(FUZZ_DEP_OBJ) $(BUILD)/libqtts-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_LINK) -fsanitize=fuzzer -o $@ $< $(FUZZ_DEP_OBJ) $(BUILD)/libqtts-internal.a $(SERVER_LIBS) $(LDLIBS)
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=undefined
fuzz-bins: $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
.PHONY: fuzz fuzz-bins
# the per-ISA kernel files are built without sanitizers or coverage (no input
# parsing there, and instrumented they take minutes each to compile)
FUZZ_MAKE = $(MAKE) BUILD=build-fuzz CC=clang CXX=clang++ VULKAN=0 OPT=-O1 SAN="$(FUZZ_SAN)" \
	ISA_avx2="$(ISA_avx2) -fno-sanitize=all" ISA_avx512="$(ISA_avx512) -fno-sanitize=all"
fuzz:
	$(FUZZ_MAKE) fuzz-bins
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh build-fuzz $(FUZZ_TARGETS)

# The server soak with faults (tests/server/soak.sh, docs/TESTING.md "Server
# soak"): `make soak SOAK_MINUTES=N` runs 8 faulty clients against
# qtts-server for N minutes; `make soak-ci` is a 3-minute run of the ASan +
# UBSan build (build-debug/): there RSS holds ASan's quarantine (limited to
# 16 MiB) and allocator caches, so its RSS bound is 25 % and leaks are
# LeakSanitizer's to find at exit.
SOAK_MINUTES ?= 20
.PHONY: soak soak-ci
$(BUILD)/soak: tests/server/soak.c $(COMMON_OBJ) $(BUILD)/obj/tools/server/metrics.o
	$(CC) $(ALL_CFLAGS) -Itools/common -Itools/server -MMD -MP -o $@ $< $(COMMON_OBJ) $(BUILD)/obj/tools/server/metrics.o $(DEP_LIBS) -lm -lpthread
soak: all $(BUILD)/soak
	SOAK_MINUTES=$(SOAK_MINUTES) BUILD=$(BUILD) sh tests/server/soak.sh
soak-ci:
	$(MAKE) BUILD=build-debug OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" all build-debug/soak
	@ASAN_OPTIONS="quarantine_size_mb=16$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}"; export ASAN_OPTIONS; \
	$(DEBUG_TEST_ENV) SOAK_MINUTES=3 SOAK_RSS_TOLERANCE=0.25 BUILD=build-debug sh tests/server/soak.sh

deps:
	sh scripts/install-deps.sh

clean:
	rm -rf build build-debug build-tsan build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
