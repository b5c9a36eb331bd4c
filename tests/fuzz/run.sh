#!/bin/sh
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for FUZZ_SECONDS
# (default 300: five minutes per target). Seeds: valid frames written by the frame target's own corpus, the ONNX node
# test models, the sample config, a small execution trace; the graph target builds its own
# graphs from its bytes and needs none. Crashes are left in build-fuzz/ as crash-* files.
#   sh tests/fuzz/run.sh            (make fuzz)
set -eu
S=${FUZZ_SECONDS:-300}
O=build-fuzz
command -v clang >/dev/null || { echo "fuzz: clang is missing: sh tools/deps.sh fuzz"; exit 1; }
make -s build/gen/ipuof.pb-c.c build/gen/onnx.pb-c.c
mkdir -p "$O/corpus/frame" "$O/corpus/onnx" "$O/corpus/config" "$O/corpus/trace" "$O/corpus/graph"
CF="-g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -DIPUOF_VERSION_STR=\"fuzz\" -Iclient/include -Iproto -Ibuild/gen -Isim -Idaemon"
LIBS="$(pkg-config --libs libprotobuf-c inih) -lopenblas -ldnnl -lgomp -lm -pthread"
clang $CF -o "$O/fuzz_frame" tests/fuzz/fuzz_frame.c proto/frame.c proto/status.c build/gen/ipuof.pb-c.c $LIBS
clang $CF -o "$O/fuzz_config" tests/fuzz/fuzz_config.c daemon/config.c daemon/errbuf.c daemon/log.c $LIBS
clang $CF -o "$O/fuzz_onnx" tests/fuzz/fuzz_onnx.c sim/*.c build/gen/onnx.pb-c.c $LIBS
clang $CF -o "$O/fuzz_graph" tests/fuzz/fuzz_graph.c sim/*.c build/gen/onnx.pb-c.c $LIBS
clang $CF -Itools/util -o "$O/fuzz_trace" tests/fuzz/fuzz_trace.c tools/util/timeline.c \
    tools/util/jsonread.c -lm
printf '{"traceEvents":[{"name":"thread_name","ph":"M","tid":0,"args":{"name":"IPU 0"}},{"name":"F0.0","ph":"X","tid":0,"ts":0,"dur":2,"args":{"stage":0,"mb":0,"iter":0,"kind":"fwd"}},{"name":"B0.0","ph":"X","tid":1,"ts":3,"dur":2.5,"args":{"kind":"bwd","s":"\\u00b5\\ud83d\\ude00"}}]}' \
    >"$O/corpus/trace/seed.json"
cp systemd/ipuofd.conf "$O/corpus/config/" 2>/dev/null || true
for t in relu conv_with_strides_padding gemm_default_single_elem_vector_bias reshape_reordered_all_dims; do
    f=/usr/share/libonnx-testdata/data/node/test_$t/model.onnx
    [ -f "$f" ] && cp "$f" "$O/corpus/onnx/$t.onnx"
done
for t in frame config onnx graph trace; do
    echo "fuzz: $t for ${S}s"
    (cd "$O" && ./fuzz_$t -max_total_time="$S" -max_len=65536 -rss_limit_mb=2048 corpus/$t) \
        >"$O/fuzz_$t.log" 2>&1 || { echo "fuzz: $t FOUND A CRASH, see $O/fuzz_$t.log"; exit 1; }
    tail -n 1 "$O/fuzz_$t.log"
done
