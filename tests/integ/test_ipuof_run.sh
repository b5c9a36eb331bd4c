#!/bin/sh
# ipuof-run over the ONNX node tests of every claimed op (tests/conformance/claimed.txt),
# against a real ipuofd: each test's model, its inputs, and --expect on its outputs.
# Usage: sh tests/integ/test_ipuof_run.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
NODE=/usr/share/libonnx-testdata/data/node
testd_sh_init run-test
[ -d "$NODE" ] || { echo "skip: $NODE missing (libonnx-testdata)"; exit 77; }

testd_sh_must_start "$B" "$D"
while read -r t _; do
    case "$t" in ''|'#'*) continue ;; esac
    set -- --model "$NODE/$t/model.onnx" --quiet --output-dir "$D/out"
    for f in "$NODE/$t"/test_data_set_0/input_*.pb; do
        [ -e "$f" ] && set -- "$@" --input "$f"
    done
    for f in "$NODE/$t"/test_data_set_0/output_*.pb; do
        set -- "$@" --expect "$f"
    done
    if "$B/bin/ipuof-run" "$@" 2>"$D/err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "not ok - $t: $(head -c 300 "$D/err")"
    fi
done < tests/conformance/claimed.txt
# The written files are TensorProtos of the graph outputs.
[ -s "$D/out/y.pb" ] || [ -n "$(ls "$D/out")" ] || { fail=$((fail + 1)); echo "not ok - no output files"; }

# --loss: a Gemm + SoftmaxCrossEntropyLoss model trains; with --output-mode all the loss of
# each of the 20 SGD steps comes back, and on one repeated batch it must fall.
PY=/usr/bin/python3
if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
    fail=$((fail + 1)); echo "not ok - --loss: $PY cannot import onnx and numpy (tools/deps.sh)"
elif ! "$PY" - "$D" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((6, 3)).astype(np.float32) * 0.1, "w")
g = helper.make_graph(
    [helper.make_node("Gemm", ["x", "w"], ["logits"]),
     helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"])],
    "train", [helper.make_tensor_value_info("x", T.FLOAT, [4, 6]),
              helper.make_tensor_value_info("labels", T.INT64, [4])],
    [helper.make_tensor_value_info("loss", T.FLOAT, [])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d + "/train.onnx")
onnx.save_tensor(numpy_helper.from_array(rng.standard_normal((4, 6)).astype(np.float32), "x"),
                 d + "/x.pb")
onnx.save_tensor(numpy_helper.from_array(np.array([0, 1, 2, 1], np.int64), "labels"),
                 d + "/labels.pb")
PYEOF
then
    fail=$((fail + 1)); echo "not ok - --loss: could not write the training model"
elif ! "$B/bin/ipuof-run" --model "$D/train.onnx" --input "x=$D/x.pb" \
        --input "labels=$D/labels.pb" --loss loss --device-iterations 20 --output-mode all \
        --output-dir "$D/train" >"$D/train.txt" 2>&1; then
    fail=$((fail + 1)); echo "not ok - --loss: $(head -c 300 "$D/train.txt")"
elif ! "$PY" - "$D/train/loss.pb" <<'PYEOF'
import sys, onnx
from onnx import numpy_helper
t = onnx.TensorProto()
t.ParseFromString(open(sys.argv[1], "rb").read())
v = numpy_helper.to_array(t).ravel()
print("--loss: %d losses, first %.4f, last %.4f" % (v.size, v[0], v[-1]))
sys.exit(0 if v.size == 20 and v[-1] < v[0] - 0.05 else 1)
PYEOF
then
    fail=$((fail + 1)); echo "not ok - --loss: the loss did not fall over 20 SGD steps"
else
    pass=$((pass + 1))
fi

testd_sh_stop
testd_sh_end
