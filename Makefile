# ipuofd — one non-recursive Makefile.
#
#   make            build programs (build/bin), the client library (build/lib)
#   make test       install missing Debian packages, build, run every test,
#                   then run the whole suite again under ASan + UBSan
#   make demo       install, build, start a daemon on loopback, run the demo job, stop it
#   make install    PREFIX=/usr/local DESTDIR= (staged installs honoured)
#   make fuzz       the libFuzzer targets (clang, ASan + UBSan) 5 minutes each; fuzz-ci: 25 s
#
# Sources are picked up by directory, so a new file needs no Makefile edit:
#   proto/*.c            frame codec (+ generated ipuof.pb-c.c)      -> part of the client lib
#   sim/PART/*.c         simulated IPU, no network code, one folder per part (SIM_PARTS)
#                                                                     -> build/lib/libipuofsim.a
#   daemon/*.c, daemon/PART/*.c  ipuofd (main.c holds main(); DAEMON_PARTS) -> build/bin/ipuofd
#   client/*/*.c         libipuof-client                             -> build/lib/libipuof-client.{so,a}
#   tools/*.c            one program per file, helpers in tools/util, ipuctl's parts in
#                        tools/ipuctl, poprun's and vipu's in tools/launch -> build/bin/NAME
#   pod/*.c, pod/*.cc    the Pod collective engine over gloo (C++ only in pod/coll_gloo.cc)
#                                                                     -> build/lib/libipuofpod.a
#   tests/unit/test_*.c  one cmocka binary per module                -> build/tests/test_*

VERSION_MAJOR := $(shell sed -n 's/^\#define IPUOF_VERSION_MAJOR \([0-9]*\).*/\1/p' client/include/ipuof/status.h)
VERSION_MINOR := $(shell sed -n 's/^\#define IPUOF_VERSION_MINOR \([0-9]*\).*/\1/p' client/include/ipuof/status.h)
VERSION_PATCH := $(shell sed -n 's/^\#define IPUOF_VERSION_PATCH \([0-9]*\).*/\1/p' client/include/ipuof/status.h)
VERSION       := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)
SONAME        := libipuof-client.so.$(VERSION_MAJOR)

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR    ?= $(PREFIX)/lib/systemd/system
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
# The Python package (python/): Debian's python3 reads /usr/lib/python3/dist-packages, and
# /usr/local/lib/python3.X/dist-packages for a /usr/local install.
PYTHONDIR  ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)/dist-packages)

# SAN=1 builds everything with AddressSanitizer + UndefinedBehaviorSanitizer into build-san/
# (with float-cast-overflow, which GCC leaves out of "undefined": a float out of an integer
# type's range converted to it, e.g. NaN to int, is undefined behaviour too).
ifeq ($(SAN),1)
BUILD   ?= build-san
SANFLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined,float-cast-overflow
else
BUILD   ?= build
SANFLAGS :=
endif

CC      ?= cc
CXX     ?= g++
CXXFLAGS ?= -O2 -g
EPOCHS  ?= 1
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wshadow \
           -Wno-missing-field-initializers -Werror
PKGS    := libevent libevent_pthreads libevent_openssl libprotobuf-c inih zlib openssl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) cmocka 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
PKG_MISSING := $(shell for p in $(PKGS) cmocka; do pkg-config --exists $$p 2>/dev/null || echo $$p; done)
# gloo (libgloo-dev) ships no .pc file: its header and a C++ compiler are looked for instead.
PKG_MISSING += $(shell test -f /usr/include/gloo/allreduce.h || echo libgloo-dev; command -v $(CXX) >/dev/null || echo $(CXX))

# What pkg-config prints is read when this file is parsed. On a new machine the libraries
# arrive with `make deps`, so the goals that run it (test, demo, deps, fuzz) build in a
# sub-make parsed after it; any other build goal stops here rather than link without them.
NO_BUILD_GOALS := deps test demo fuzz fuzz-ci clean uninstall help
ifneq ($(strip $(PKG_MISSING)),)
ifneq ($(filter-out $(NO_BUILD_GOALS),$(or $(MAKECMDGOALS),all)),)
$(error pkg-config cannot find: $(strip $(PKG_MISSING)). Run 'make deps' (it installs the Debian packages), or 'make test' / 'make demo', which run it first)
endif
endif
BLAS_LIBS  := -lopenblas -ldnnl -lgomp
ALL_CFLAGS  = $(WARN) $(CFLAGS) $(SANFLAGS) -fPIC -pthread -D_GNU_SOURCE -MMD -MP \
              -DIPUOF_VERSION_STR='"$(VERSION)"' \
              -Iclient/include -Iproto -I$(BUILD)/gen $(CINC) $(PKG_CFLAGS)
# Include paths per part (issue 30; sim/README.md, daemon/README.md, client/README.md): sim/,
# daemon/ and client/ are folders of parts, listed bottom first. An object of a part sees the
# headers of its own part and of the parts below it, so no file includes upwards
# (tools/dep_cycles.sh checks the calls). sim/ sees no daemon, pod, tools or tests header;
# the daemon sees the simulator through sim/sim.h alone (-Isim); the client sees only its
# own parts (and proto/, the public headers). Everything else (tools, tests, bench, pod)
# sees all.
SIM_PARTS    := kernels ir nn ops sched exec compile onnx run
DAEMON_PARTS := base pod state conn faults compile jobs requests
CLIENT_PARTS := wire admin model data
# $(call upto,PART,PARTS,NAME): PARTS from the first up to PART; a folder not in the list stops make.
upto = $(if $2,$(if $(filter $1,$(firstword $2)),$1,$(firstword $2) $(call upto,$1,$(wordlist 2,$(words $2),$2),$3)),$(error $1 is not in $3: add the folder to the list))
CINC = -Isim $(addprefix -Isim/,$(SIM_PARTS)) -Idaemon $(addprefix -Idaemon/,$(DAEMON_PARTS)) \
       -Ipod -Itools/util -Itools/ipuctl -Itools/launch -Itests/util \
       $(addprefix -Iclient/,$(CLIENT_PARTS))
$(BUILD)/obj/sim/%.o: CINC = -Isim $(addprefix -Isim/,$(call upto,$(notdir $(@D)),$(SIM_PARTS),SIM_PARTS))
$(BUILD)/obj/daemon/%.o: CINC = -Isim -Ipod $(if $(filter $(BUILD)/obj/daemon,$(@D)),-Idaemon \
    $(addprefix -Idaemon/,$(DAEMON_PARTS)),$(addprefix -Idaemon/,$(call upto,$(notdir $(@D)),$(DAEMON_PARTS),DAEMON_PARTS)))
$(BUILD)/obj/client/%.o: CINC = $(addprefix -Iclient/,$(if $(filter $(BUILD)/obj/client,$(@D)),\
    $(CLIENT_PARTS),$(call upto,$(notdir $(@D)),$(CLIENT_PARTS),CLIENT_PARTS)))
# C++ is pod/coll_gloo.cc alone (gloo's API); the same warnings as C where C++ has them.
ALL_CXXFLAGS = -std=c++17 -Wall -Wextra -Wshadow -Wno-missing-field-initializers -Werror \
              $(CXXFLAGS) $(SANFLAGS) -fPIC -pthread -D_GNU_SOURCE -MMD -MP -Ipod
# gloo's shared library (Debian installs it in /usr/lib) and the C++ runtime it needs.
POD_LIBS := -lgloo -lstdc++
LDFLAGS ?=
ALL_LDFLAGS = $(LDFLAGS) $(SANFLAGS) -pthread

ONNX_PROTO ?= /usr/include/onnx/onnx.proto

PROTO_SRC  := $(wildcard proto/*.c)
SIM_SRC    := $(wildcard sim/*/*.c)
ifneq ($(wildcard sim/*.c),)
$(error $(wildcard sim/*.c): every source of sim/ lives in a part folder (sim/README.md, "Folders"))
endif
DAEMON_SRC := $(wildcard daemon/*.c daemon/*/*.c)
CLIENT_SRC := $(wildcard client/*.c client/*/*.c)
TOOLUTIL_SRC := $(wildcard tools/util/*.c tools/ipuctl/*.c tools/launch/*.c)
POD_SRC    := $(wildcard pod/*.c)
POD_CXXSRC := $(wildcard pod/*.cc)
TOOL_SRC   := $(wildcard tools/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
INTEG_SRC  := $(wildcard tests/integ/test_*.c)
DRV_SRC    := $(wildcard tests/integ/drv_*.c)
TESTUTIL_SRC := $(wildcard tests/util/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

GEN_IPUOF := $(BUILD)/gen/ipuof.pb-c.c
GEN_ONNX  := $(BUILD)/gen/onnx.pb-c.c
GEN_HDRS  := $(GEN_IPUOF:.c=.h) $(GEN_ONNX:.c=.h)

PROTO_OBJ  := $(call obj,$(PROTO_SRC)) $(BUILD)/obj/gen/ipuof.pb-c.o
SIM_OBJ    := $(call obj,$(SIM_SRC)) $(BUILD)/obj/gen/onnx.pb-c.o
DAEMON_OBJ := $(call obj,$(filter-out daemon/main.c,$(DAEMON_SRC)))
CLIENT_OBJ := $(call obj,$(CLIENT_SRC)) $(PROTO_OBJ)
TOOLUTIL_OBJ := $(call obj,$(TOOLUTIL_SRC))
POD_OBJ    := $(call obj,$(POD_SRC)) $(patsubst %.cc,$(BUILD)/obj/%.o,$(POD_CXXSRC))
TESTUTIL_OBJ := $(call obj,$(TESTUTIL_SRC))

LIB_PROTO  := $(BUILD)/lib/libipuofproto.a
LIB_SIM    := $(BUILD)/lib/libipuofsim.a
LIB_DAEMON := $(BUILD)/lib/libipuofd-core.a
LIB_CLIENT_A  := $(BUILD)/lib/libipuof-client.a
LIB_CLIENT_SO := $(BUILD)/lib/libipuof-client.so.$(VERSION)
# The Python package's cffi declarations, generated from the public header (tools/py_cdef.sh).
PY_CDEF       := $(BUILD)/lib/ipuof-client.cdef
LIB_TOOLUTIL  := $(BUILD)/lib/libipuoftools.a
LIB_POD       := $(BUILD)/lib/libipuofpod.a
LIB_TESTUTIL  := $(BUILD)/lib/libipuoftest.a

DAEMON_BIN := $(BUILD)/bin/ipuofd
TOOL_BINS  := $(patsubst tools/%.c,$(BUILD)/bin/%,$(TOOL_SRC))
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
INTEG_BINS := $(patsubst tests/integ/%.c,$(BUILD)/tests/integ/%,$(INTEG_SRC))
# Drivers: C halves of shell tests (tests/integ/test_*.sh run them); never run on their own.
DRV_BINS   := $(patsubst tests/integ/%.c,$(BUILD)/tests/integ/%,$(DRV_SRC))

.PHONY: all deps test check check-unit check-integ test-san check-clang identity test-models test-published memory-published demo install uninstall clean bench bench-models bench-clock fuzz fuzz-ci soak-faults
.SUFFIXES:
.DELETE_ON_ERROR:
# Objects built on the way to a test program are kept, so a second make rebuilds nothing.
.SECONDARY:

all: $(DAEMON_BIN) $(TOOL_BINS) $(LIB_CLIENT_SO) $(LIB_CLIENT_A) $(BUILD)/lib/ipuof-client.pc $(PY_CDEF) $(UNIT_BINS) $(INTEG_BINS) $(DRV_BINS)

# ---- generated protobuf-c code ------------------------------------------------------------
$(GEN_IPUOF) $(GEN_IPUOF:.c=.h): proto/ipuof.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --proto_path=proto --c_out=$(BUILD)/gen proto/ipuof.proto

$(GEN_ONNX) $(GEN_ONNX:.c=.h): $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen
	protoc-c --proto_path=$(dir $(ONNX_PROTO)) --c_out=$(BUILD)/gen $(ONNX_PROTO)

# ---- objects ------------------------------------------------------------------------------
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -Werror -Wshadow,$(ALL_CFLAGS)) -c -o $@ $<

$(BUILD)/obj/%.o: %.c $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# The simulated clock's figures must be the same on every host and ISA: no FMA contraction.
$(filter %/cost.o %/cost_node.o %/cost_report.o %/schedule.o,$(SIM_OBJ)): ALL_CFLAGS += -ffp-contract=off

$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -c -o $@ $<

# ---- libraries ----------------------------------------------------------------------------
$(LIB_PROTO): $(PROTO_OBJ)
$(LIB_SIM): $(SIM_OBJ)
$(LIB_DAEMON): $(DAEMON_OBJ)
$(LIB_CLIENT_A): $(CLIENT_OBJ)
$(LIB_TOOLUTIL): $(TOOLUTIL_OBJ)
$(LIB_POD): $(POD_OBJ)
$(LIB_TESTUTIL): $(TESTUTIL_OBJ)
$(BUILD)/lib/%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIB_CLIENT_SO): $(CLIENT_OBJ) client/libipuof-client.sym
	@mkdir -p $(dir $@)
	$(CC) -shared $(ALL_LDFLAGS) -Wl,-soname,$(SONAME) -Wl,--version-script=client/libipuof-client.sym \
	    -Wl,-z,relro -Wl,-z,now -Wl,--no-undefined -o $@ $(CLIENT_OBJ) $(shell pkg-config --libs libprotobuf-c zlib openssl)
	ln -sf $(notdir $@) $(BUILD)/lib/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/lib/libipuof-client.so

# The .pc file is made again at install time, for the PREFIX given to make install.
PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|' \
	    -e 's|@LIBDIR@|$(patsubst $(PREFIX)%,$${prefix}%,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)%,$${prefix}%,$(INCLUDEDIR))|' \
	    -e 's|@VERSION@|$(VERSION)|' client/ipuof-client.pc.in
# python/ipuof/_lib.py reads it next to the library it loads (installed: in the package).
$(PY_CDEF): client/include/ipuof/client.h client/include/ipuof/status.h tools/py_cdef.sh
	@mkdir -p $(@D)
	sh tools/py_cdef.sh client/include $(CC) > $@.tmp && mv $@.tmp $@
$(BUILD)/lib/ipuof-client.pc: client/ipuof-client.pc.in client/include/ipuof/status.h
	@mkdir -p $(dir $@)
	$(PC_SED) > $@

# ---- programs -----------------------------------------------------------------------------
$(DAEMON_BIN): $(BUILD)/obj/daemon/main.o $(LIB_DAEMON) $(LIB_POD) $(LIB_SIM) $(LIB_PROTO)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -Wl,-z,relro -Wl,-z,now -o $@ $^ $(PKG_LIBS) $(BLAS_LIBS) $(POD_LIBS) -lm

# Tools link the client library statically: an installed ipuctl never depends on a build rpath.
$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(LIB_TOOLUTIL) $(LIB_CLIENT_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -Wl,-z,relro -Wl,-z,now -o $@ $^ $(shell pkg-config --libs libprotobuf-c zlib openssl) -lm

# Unit tests may use any internal library; static linking pulls in only what they touch.
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIB_TESTUTIL) $(LIB_TOOLUTIL) $(LIB_DAEMON) $(LIB_POD) $(LIB_SIM) $(LIB_CLIENT_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(shell pkg-config --libs cmocka) $(BLAS_LIBS) $(POD_LIBS) -lm

# Integration tests talk to a real daemon through the client library and raw frames.
# (libipuofsim.a only for its ONNX TensorProto reader, to load test data.)
$(BUILD)/tests/integ/%: $(BUILD)/obj/tests/integ/%.o $(LIB_TESTUTIL) $(LIB_SIM) $(LIB_CLIENT_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(shell pkg-config --libs libprotobuf-c cmocka zlib openssl) $(BLAS_LIBS) -lm

# ---- dependencies, tests, demo ------------------------------------------------------------
deps:
	@sh tools/deps.sh

# make test = deps, build, the suite, then the suite again under ASan/UBSan.
test: deps
	$(MAKE) check
	$(MAKE) SAN=1 check

check: all
	@sh tests/run.sh $(BUILD)

test-san:
	$(MAKE) SAN=1 check

# The simulator's unit tests built by clang with its sanitizers into build-clang/: clang's
# UBSan checks what GCC's does not (an offset applied to a NULL pointer, which the backward
# pass's NULL views for unread activations can cause). Not in make test (about 2 minutes);
# CI (.ci/run) runs it.
SIM_UNIT_CLANG := $(patsubst tests/unit/%.c,build-clang/tests/%,$(wildcard tests/unit/test_sim_*.c))
check-clang:
	@sh tools/deps.sh fuzz
	$(MAKE) CC=clang CXX=clang++ LDFLAGS=-fsanitize-link-c++-runtime SAN=1 BUILD=build-clang \
		$(SIM_UNIT_CLANG)
	@sh tests/unit_clang.sh $(SIM_UNIT_CLANG)

# The identity harness of a refactor (docs/testing.md): the 151 configurations of
# tools/identity.py against the build of another checkout (OLD=../old/build) and this one;
# fails naming each configuration and part (outputs, weights, cost, trace) that differs.
# Not in make test (about 25 s on 2 cores: both builds' runs).
identity: all
	@[ -n "$(OLD)" ] || { echo "make identity OLD=PATH/TO/OTHER/build" >&2; exit 64; }
	@sh tools/identity.sh $(OLD) $(BUILD)

# Every torchvision classification model of issue 10 against PyTorch, and a resnet18 SGD step.
test-models: all
	@sh tests/integ/test_torchvision.sh $(BUILD) all

# Graphcore's published configurations (issue 27): ResNet-50 and BERT-Base phase 1 at their
# published shapes against a real ipuofd (python/tests_published; minutes per test: a
# ResNet-50 step of 36 float16 samples took over the client's default 600 s request time
# on a loaded 2-core machine, so the requests may take an hour here).
test-published: all
	@IPUOF_BUILD=$(BUILD) IPUOF_REQUEST_TIMEOUT_MS=$${IPUOF_REQUEST_TIMEOUT_MS:-3600000} \
		/usr/bin/python3 -m pytest -v -p no:cacheprovider python/tests_published

# The memory plan's figures per IPU of the two published configurations (docs/memory.md),
# compiled without a step: minutes, on a daemon of its own.
memory-published: all
	@/usr/bin/python3 bench/published_memory.py --build $(BUILD)

# deps first, then a sub-make: it is parsed after deps has installed the libraries.
demo: deps
	$(MAKE) all
	@EPOCHS=$(EPOCHS) sh tools/demo.sh $(BUILD)

bench: all
	@sh bench/run.sh $(BUILD)

bench-models: all
	@/usr/bin/python3 bench/models.py --build $(BUILD)

# The simulated clock against Graphcore's published throughput (issue 28, docs/cost-model.md):
# each configuration's prediction, the published figure, the ratio and the source.
bench-clock: all
	@/usr/bin/python3 bench/clock.py --build $(BUILD)

# The fault soak (issue 22, docs/faults.md): SOAK_FAULTS random faults (seeded by SOAK_SEED)
# across 4 clients training with the Python package, recovering as PopTorch's programs do;
# prints faults, recoveries, time to recover and the daemon's memory and descriptors. A few
# minutes of both cores: not part of make test.
SOAK_FAULTS ?= 1000
SOAK_SEED ?= 1
soak-faults: all
	@/usr/bin/python3 tests/soak/soak_faults.py --build $(BUILD) --faults $(SOAK_FAULTS) --seed $(SOAK_SEED)

# libFuzzer targets (clang, ASan + UBSan, undefined behaviour fatal): the frame codec, the
# config parser, the ONNX importer+compiler, graphs built from the fuzzer's bytes compiled
# and run (one IPU and split), the trace reader; each for FUZZ_SECONDS (default 300), after
# replaying the inputs of past defects (tests/fuzz/corpus). Any report fails the goal.
# fuzz-ci: the same, 25 s a target with a fixed seed (about 2 min, plus the build): .ci/run
# runs it.
fuzz:
	@sh tools/deps.sh fuzz
	@sh tests/fuzz/run.sh

fuzz-ci:
	@sh tools/deps.sh fuzz
	@FUZZ_SECONDS=25 FUZZ_SEED=1 sh tests/fuzz/run.sh

# ---- install ------------------------------------------------------------------------------
install: all
	install -Dm0755 $(DAEMON_BIN) $(DESTDIR)$(SBINDIR)/ipuofd
	for t in $(TOOL_BINS); do install -Dm0755 $$t $(DESTDIR)$(BINDIR)/$$(basename $$t); done
	ln -sf vipu $(DESTDIR)$(BINDIR)/vipu-admin
	install -Dm0644 $(LIB_CLIENT_A) $(DESTDIR)$(LIBDIR)/libipuof-client.a
	install -Dm0755 $(LIB_CLIENT_SO) $(DESTDIR)$(LIBDIR)/$(notdir $(LIB_CLIENT_SO))
	ln -sf $(notdir $(LIB_CLIENT_SO)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libipuof-client.so
	install -Dm0644 client/include/ipuof/client.h $(DESTDIR)$(INCLUDEDIR)/ipuof/client.h
	install -Dm0644 client/include/ipuof/status.h $(DESTDIR)$(INCLUDEDIR)/ipuof/status.h
	mkdir -p $(DESTDIR)$(LIBDIR)/pkgconfig
	$(PC_SED) > $(DESTDIR)$(LIBDIR)/pkgconfig/ipuof-client.pc
	install -Dm0644 systemd/ipuofd.service $(DESTDIR)$(UNITDIR)/ipuofd.service
	sed -i 's|/usr/sbin/ipuofd|$(SBINDIR)/ipuofd|; s|/etc/ipuofd/|$(SYSCONFDIR)/ipuofd/|' \
	    $(DESTDIR)$(UNITDIR)/ipuofd.service
	install -Dm0644 systemd/ipuofd.conf $(DESTDIR)$(SYSCONFDIR)/ipuofd/ipuofd.conf
	for m in man/*.[0-9]; do s=$${m##*.}; install -Dm0644 $$m $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m); done
	for f in python/ipuof/*.py python/ipuof/*/*.py python/poptorch/*.py python/popdist/*.py; do install -Dm0644 $$f $(DESTDIR)$(PYTHONDIR)/$${f#python/}; done
	install -Dm0644 $(PY_CDEF) $(DESTDIR)$(PYTHONDIR)/ipuof/ipuof-client.cdef

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/ipuofd $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOL_BINS))) $(DESTDIR)$(BINDIR)/vipu-admin
	rm -f $(DESTDIR)$(LIBDIR)/libipuof-client.* $(DESTDIR)$(LIBDIR)/pkgconfig/ipuof-client.pc
	rm -rf $(DESTDIR)$(INCLUDEDIR)/ipuof
	rm -rf $(DESTDIR)$(PYTHONDIR)/ipuof $(DESTDIR)$(PYTHONDIR)/poptorch $(DESTDIR)$(PYTHONDIR)/popdist
	rm -f $(DESTDIR)$(UNITDIR)/ipuofd.service
	for m in man/*.[0-9]; do s=$${m##*.}; rm -f $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m); done

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
