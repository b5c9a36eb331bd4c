#!/bin/sh
# The placement options of the tools against a real ipuofd: ipuof-run splits a two-block
# model (nodes named as torch 1.13 names them) over two IPUs with --block, pipelined, and
# its outputs still match numpy; --profile writes the trace and a two-row timeline, and so
# does POPLAR_ENGINE_OPTIONS for the unchanged command (the library's autoReport); bad
# --block / --strategy values (a stage or IPU out of range named with the range) and a
# prefix matching no node are refused with what would be
# right. ipuof-mnist --strategy pipelined trains the tutorial over four IPUs to the same
# test accuracy as on one IPU (the weights do not depend on the strategy), prints the
# per-IPU memory with pipeline stashes, the simulated device time, each IPU's busy fraction
# and the predicted samples/s, and --profile writes a four-row timeline.
# Usage: sh tests/integ/test_placement_tools.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
DATA=${IPUOF_MNIST_DATA:-/usr/share/datasets/fashion-mnist}
PY=/usr/bin/python3
testd_sh_init placement-test
testd_sh_must_start "$B" "$D"
RUN="$B/bin/ipuof-run"

# y = Relu(Relu(x W1) W2), nodes /b1/... and /b2/...; 4 device iterations of a [4, 8] x.
"$PY" - "$D" <<'PY' || { echo "not ok - making the model (python3 onnx, numpy)"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
rs = np.random.RandomState(7)
w1, w2 = rs.randn(8, 8).astype(np.float32), rs.randn(8, 8).astype(np.float32)
x = rs.randn(16, 8).astype(np.float32)
nodes = [helper.make_node("MatMul", ["x", "W1"], ["h1"], name="/b1/MatMul"),
         helper.make_node("Relu", ["h1"], ["a1"], name="/b1/Relu"),
         helper.make_node("MatMul", ["a1", "W2"], ["h2"], name="/b2/MatMul"),
         helper.make_node("Relu", ["h2"], ["y"], name="/b2/Relu")]
g = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                      [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, d + "/two.onnx")
onnx.save_tensor(numpy_helper.from_array(x, "x"), d + "/x.pb")
y = np.maximum(np.maximum(x @ w1, 0) @ w2, 0)
onnx.save_tensor(numpy_helper.from_array(y, "y"), d + "/y.pb")
PY

if "$RUN" --model "$D/two.onnx" --input "$D/x.pb" --device-iterations 4 --expect "$D/y.pb" \
    --block /b1/:0 --block /b2/:1 --strategy pipelined --profile "$D/rp" >"$D/out" 2>&1 &&
    grep -q "simulated device time .* ms, predicted .* samples/s on IPUs, bottleneck stage [01], busy: IPU 0 .* IPU 1 " "$D/out" &&
    [ -s "$D/rp/trace.json" ] && [ -s "$D/rp/timeline.svg" ] &&
    [ "$(grep -c '<g class="row"' "$D/rp/timeline.svg")" -eq 2 ]; then
    ok "ipuof-run --block over 2 IPUs, pipelined: outputs match numpy, cost line, 2-row timeline"
else
    not_ok "ipuof-run --block: $(cat "$D/out")"
fi
grep "simulated" "$D/out"

# An unchanged program profiled through the environment, as Poplar's autoReport does.
if POPLAR_ENGINE_OPTIONS="{\"autoReport.all\":\"true\",\"autoReport.directory\":\"$D/auto\"}" \
    "$RUN" --model "$D/two.onnx" --input "$D/x.pb" --device-iterations 4 --block /b1/:0 \
    --block /b2/:1 >"$D/out" 2>&1 && grep -q '"F1.3"' "$D/auto/two.trace.json"; then
    ok "POPLAR_ENGINE_OPTIONS autoReport: the library wrote $D/auto/two.trace.json"
else
    not_ok "POPLAR_ENGINE_OPTIONS: $(cat "$D/out"; ls "$D/auto" 2>&1)"
fi

expect_refused() { # status, needle, description, then the command
    want=$1 needle=$2 what=$3
    shift 3
    "$@" >"$D/out" 2>&1
    rc=$?
    if [ $rc -eq "$want" ] && grep -q -- "$needle" "$D/out"; then
        ok "$what: $(grep -m1 -- "$needle" "$D/out")"
    else
        not_ok "$what (exit $rc): $(cat "$D/out")"
    fi
}
expect_refused 64 "PREFIX\[:STAGE\]:IPU" "--block without an IPU" \
    "$RUN" --model "$D/two.onnx" --block /b1/
expect_refused 64 "--block's IPU" "--block with a bad IPU" \
    "$RUN" --model "$D/two.onnx" --block /b1/:x
expect_refused 64 "stage 4097 is out of range; stages are 0 to 4096" \
    "--block with a stage past 4096 (main: 'matches no node')" \
    "$RUN" --model "$D/two.onnx" --input "$D/x.pb" --block /b1/:4097:0
expect_refused 64 "IPU 4097 is out of range; a block's IPU is an index within one replica, 0 to 63" \
    "--block with an IPU past any daemon's" \
    "$RUN" --model "$D/two.onnx" --input "$D/x.pb" --block /b1/:0:4097
expect_refused 64 "pipelined, sharded or phased" "--strategy unknown" \
    "$RUN" --model "$D/two.onnx" --strategy fast
expect_refused 1 "/nope/" "a prefix matching no node" \
    "$RUN" --model "$D/two.onnx" --input "$D/x.pb" --device-iterations 4 --block /b1/:0 \
    --block /nope/:1
expect_refused 1 "8 IPUs" "a block on IPU 4 needs 8 IPUs of a 4-IPU daemon" \
    "$RUN" --model "$D/two.onnx" --input "$D/x.pb" --block /b1/:0 --block /b2/:4

if [ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ]; then
    MN="$B/bin/ipuof-mnist"
    set -- --epochs 1 --limit-train 4000 --limit-test 400
    "$MN" "$@" >"$D/single" 2>&1 || not_ok "ipuof-mnist single: $(cat "$D/single")"
    if "$MN" "$@" --strategy pipelined --profile "$D/mp" >"$D/pipe" 2>&1; then
        ok "ipuof-mnist --strategy pipelined --profile"
    else
        not_ok "ipuof-mnist --strategy pipelined: $(cat "$D/pipe")"
    fi
    cat "$D/pipe"
    a1=$(grep "Accuracy on test set" "$D/single")
    a2=$(grep "Accuracy on test set" "$D/pipe")
    [ -n "$a1" ] && [ "$a1" = "$a2" ] && ok "same accuracy pipelined over 4 IPUs as on one: $a2" ||
        not_ok "accuracy single '$a1' vs pipelined '$a2'"
    for n in 0 1 2 3; do
        grep -q "^  IPU $n: .* (stash .*, off chip" "$D/pipe" &&
            grep -q "^  IPU $n busy [0-9.]*%" "$D/pipe" || not_ok "IPU $n's memory and busy lines"
    done
    grep -q "^  IPU 0: .* (stash [1-9]" "$D/pipe" && ok "IPU 0 stashes activations for micro-batches in flight" ||
        not_ok "no stash on IPU 0"
    grep -q "^predicted on IPUs: [0-9]* samples/s, [0-9.]* calls/s (it/s) \[pipelined" "$D/pipe" &&
        ok "predicted samples/s printed" || not_ok "no prediction line"
    [ "$(grep -c '<g class="row"' "$D/mp/timeline.svg" 2>/dev/null)" = 4 ] &&
        grep -q '"F3\.9"' "$D/mp/trace.json" && ok "trace with stage 3 micro-batch 9, 4-row timeline" ||
        not_ok "profile files"
    "$MN" "$@" --strategy pipelined --offload-optimiser >"$D/off" 2>&1 &&
        grep -q "^  IPU 0: .* off chip [1-9]" "$D/off" && ok "--offload-optimiser: state off chip" ||
        not_ok "--offload-optimiser: $(cat "$D/off")"
    expect_refused 64 "single, pipelined, sharded or phased" "ipuof-mnist --strategy unknown" \
        "$MN" --strategy fast
else
    not_ok "no Fashion-MNIST in $DATA (Debian package dataset-fashion-mnist)"
fi
testd_sh_stop
testd_sh_end
