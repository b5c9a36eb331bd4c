#!/bin/sh
# Builds the libFuzzer targets with clang under ASan + UBSan and runs each for FUZZ_SECONDS
# (default 300: five minutes per target; make fuzz-ci, which CI runs, gives 25).
#   sh tests/fuzz/run.sh                         (make fuzz)
#   FUZZ_SECONDS=25 sh tests/fuzz/run.sh         (make fuzz-ci)
#   FUZZ_TARGETS="trace graph" sh tests/fuzz/run.sh   some targets only
#   sh tests/fuzz/run.sh --build                 build only (build-fuzz/fuzz_*)
#
# The libraries are built by the Makefile's own rules into build-fuzz/ (clang, -O1, the
# sanitizers plus libFuzzer's coverage instrumentation), so a second run rebuilds only what
# changed. Undefined behaviour is fatal (-fno-sanitize-recover=undefined, halt_on_error):
# UBSan does not report and carry on, it stops the target, which leaves a crash-* file in
# build-fuzz/ and fails this script, as a memory error or a leak does.
#
# Corpora: build-fuzz/corpus/TARGET (seeds written here, and what the fuzzer finds), then
# tests/fuzz/corpus/TARGET, the checked-in inputs that once found a defect (each named after
# it): every run replays them first, so a defect that comes back fails at once.
# Seeds: the ONNX node test models, the sample config, a small execution trace; the frame
# and graph targets build theirs from their bytes; the pod target starts from its corpus
# (tests/fuzz/corpus/pod, which tests/unit/test_pod_conn.c also replays in make test).
set -eu
cd "$(dirname "$0")/../.."
S=${FUZZ_SECONDS:-300}
# FUZZ_SEED fixes libFuzzer's seed (make fuzz-ci: 1), so the same tree mutates the same way
# and CI does not pass or fail by the luck of its mutations; unset, a new seed every run.
SEED=${FUZZ_SEED:+-seed=$FUZZ_SEED}
O=build-fuzz
T=${FUZZ_TARGETS:-frame config onnx graph trace pod}
command -v clang >/dev/null || { echo "fuzz: clang is missing: sh tools/deps.sh fuzz"; exit 1; }

UB="-fno-sanitize-recover=undefined -fno-omit-frame-pointer"
make -s -j2 BUILD=$O CC=clang CXX=clang++ CFLAGS="-g -O1" CXXFLAGS="-g -O1" \
    SANFLAGS="-fsanitize=fuzzer-no-link,address,undefined $UB" \
    $O/lib/libipuofsim.a $O/lib/libipuofproto.a $O/lib/libipuoftools.a $O/lib/libipuofd-core.a \
    $O/lib/libipuofpod.a $O/lib/libipuoftest.a
CF="-std=c11 -Wall -Wextra -Wstrict-prototypes -Wshadow -Werror -g -O1 -fsanitize=fuzzer,address,undefined $UB -D_GNU_SOURCE -Iclient/include -Iproto -I$O/gen $(for d in sim sim/*/; do printf -- " -I%s" "${d%/}"; done) $(for d in daemon daemon/*/; do printf -- " -I%s" "${d%/}"; done) -Itools/util -Itests/util"
LIBS="$(pkg-config --libs libprotobuf-c inih openssl) -lopenblas -ldnnl -lgomp -lm -pthread"
PODLIBS="$(pkg-config --libs libevent libevent_pthreads libevent_openssl zlib) -lgloo -lstdc++"
L=$O/lib
for t in $T; do
    case $t in
    frame) libs="$L/libipuofproto.a" ;;
    config) libs="$L/libipuofd-core.a $L/libipuofsim.a" ;;
    onnx | graph) libs="$L/libipuofsim.a" ;;
    trace) libs="$L/libipuoftools.a $L/libipuofproto.a" ;;
    pod) libs="$L/libipuoftest.a $L/libipuofd-core.a $L/libipuofpod.a $L/libipuofsim.a $L/libipuofproto.a $PODLIBS" ;;
    *) echo "fuzz: no target '$t' (frame config onnx graph trace pod)"; exit 2 ;;
    esac
    # The pod target links the Pod's C++ collective engine (gloo): clang++ links it, so
    # that the sanitizers' C++ runtime comes with it.
    link=clang
    [ "$t" = pod ] && link=clang++
    clang $CF -c -o "$O/fuzz_$t.o" "tests/fuzz/fuzz_$t.c"
    # shellcheck disable=SC2086
    $link -g -O1 -fsanitize=fuzzer,address,undefined $UB -o "$O/fuzz_$t" "$O/fuzz_$t.o" \
        $libs $LIBS
done
[ "${1:-}" = --build ] && exit 0

for t in frame config onnx graph trace pod; do
    mkdir -p "$O/corpus/$t" "tests/fuzz/corpus/$t"
done
printf '{"traceEvents":[{"name":"thread_name","ph":"M","tid":0,"args":{"name":"IPU 0"}},{"name":"F0.0","ph":"X","tid":0,"ts":0,"dur":2,"args":{"stage":0,"mb":0,"iter":0,"kind":"fwd"}},{"name":"B0.0","ph":"X","tid":1,"ts":3,"dur":2.5,"args":{"kind":"bwd","s":"\\u00b5\\ud83d\\ude00"}}]}' \
    >"$O/corpus/trace/seed.json"
cp systemd/ipuofd.conf "$O/corpus/config/"
for t in relu conv_with_strides_padding gemm_default_single_elem_vector_bias reshape_reordered_all_dims \
    if loop11 range_float_type_positive_delta_expanded; do
    f=/usr/share/libonnx-testdata/data/node/test_$t/model.onnx
    if [ -f "$f" ]; then cp "$f" "$O/corpus/onnx/$t.onnx"; fi
done

export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1"
for t in $T; do
    log="$O/fuzz_$t.log"
    echo "fuzz: $t for ${S}s"
    if ! (cd "$O" && nice ./fuzz_"$t" -max_total_time="$S" -max_len=65536 -rss_limit_mb=2048 -timeout=60 $SEED \
            -print_final_stats=1 "corpus/$t" "../tests/fuzz/corpus/$t") >"$log" 2>&1 ||
        grep -q -E 'runtime error:|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' "$log"; then
        grep -E -A30 'runtime error:|ERROR: ' "$log" | head -n 40
        echo "fuzz: $t FOUND A CRASH: $log, the input in $O/crash-* (or leak-*, timeout-*)"
        exit 1
    fi
    # "#N DONE cov: C ft: F corp: ..." and libFuzzer's final counters, on one line.
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $t clean: $execs runs; $done_line"
done
