#!/bin/sh
# What a newcomer trips on, against a real ipuofd on an ephemeral loopback port: a model with
# a dynamic batch axis run as given, the real input names listed for a wrong --input name, a
# file that is not ONNX named, exit codes as the man pages say (a --wait that runs out: 75;
# an admin socket the user may not open: 77 with who may), and ipuof-mnist's checks made
# before any work (--save into a missing directory, --limit-train below one call); the
# simulator kernels' instruction set in ipuofd's log, and an IPUOF_SIM_ISA that is not a
# level refused at start (78, naming the levels).
# Usage: sh tests/integ/test_tools_errors.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
PY=/usr/bin/python3
testd_sh_init tools-test
HOLD=""
no() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && sed 's/^/#   /' "$2"; }
check() { # description expected-rc actual-rc [file to show on failure]
    if [ "$2" = "$3" ]; then ok "$1"; else no "$1 (exit $3, expected $2)" "${4:-}"; fi
}
has() { # description file text
    if grep -q -- "$3" "$2"; then ok "$1"; else no "$1: no '$3' in:" "$2"; fi
}

chmod 0755 "$D"
testd_sh_must_start "$B" "$D" --ipus 4 --admin-socket "$D/admin.sock"

# A Relu with a dynamic batch axis, as torch.onnx.export(dynamic_axes=...) writes it, and a
# batch-5 input.
"$PY" - "$D" <<'PY' || no "python3-onnx made the test model"
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "dyn", [x], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d + "/dyn.onnx")
a = (np.arange(15, dtype=np.float32).reshape(5, 3) - 7)
onnx.save_tensor(numpy_helper.from_array(a, "x"), d + "/x5.pb")
onnx.save_tensor(numpy_helper.from_array(np.maximum(a, 0), "y"), d + "/y5.pb")
PY
RUN="$B/bin/ipuof-run"
"$RUN" --model "$D/dyn.onnx" --input "$D/x5.pb" --expect "$D/y5.pb" >"$D/out" 2>"$D/err"
check "a dynamic batch axis takes the micro-batch from the input (5)" 0 $? "$D/err"
has "  ... and says where it took it from" "$D/err" "micro-batch 5 from"
"$RUN" --model "$D/dyn.onnx" --input "$D/x5.pb" --device-iterations 5 --output-mode all \
    >"$D/out" 2>"$D/err"
check "  with 5 device iterations the 5 rows are the whole call (micro-batch 1)" 0 $? "$D/err"
has "  ... micro-batch 1" "$D/err" "micro-batch 1 from"
"$RUN" --model "$D/dyn.onnx" >"$D/out" 2>"$D/err"
check "no input to take it from: exit 1" 1 $? "$D/err"
has "  ... naming --micro-batch" "$D/err" "give --micro-batch B"

"$RUN" --model "$D/dyn.onnx" --micro-batch 5 --input "wrong=$D/x5.pb" >"$D/out" 2>"$D/err"
check "--input with a wrong name fails" 1 $? "$D/err"
has "  ... listing the model's inputs" "$D/err" "its inputs are: 'x'"

printf 'this is not a model\n' >"$D/notes.onnx"
"$RUN" --model "$D/notes.onnx" >"$D/out" 2>"$D/err"
check "a file that is not ONNX fails" 1 $? "$D/err"
has "  ... naming the file" "$D/err" "$D/notes.onnx is not an ONNX model"

# Exit codes the man pages give.
"$B/bin/ipuof-hello" --ipus 4 --hold 5000 >"$D/hold" 2>&1 &
HOLD=$!
KIDS=$HOLD
i=0
while ! grep -q attached "$D/hold" && [ $i -lt 250 ]; do sleep 0.02; i=$((i + 1)); done
"$B/bin/ipuof-hello" --ipus 4 --wait 200 >"$D/out" 2>"$D/err"
check "ipuof-hello --wait that runs out exits 75" 75 $? "$D/err"
"$RUN" --model "$D/dyn.onnx" --micro-batch 5 --input "$D/x5.pb" >"$D/out" 2>"$D/err"
check "ipuof-run on busy IPUs fails" 1 $? "$D/err"
has "  ... and the advice names a way to wait" "$D/err" "wait"
"$RUN" --model "$D/dyn.onnx" --micro-batch 5 --input "$D/x5.pb" --wait=1 >"$D/out" 2>"$D/err"
check "ipuof-run --wait=1 queues, then gives up" 1 $? "$D/err"
has "  ... after waiting" "$D/err" "TIMEOUT"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null; HOLD="" KIDS=""

if command -v setpriv >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    chmod 0755 "$D"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$B/bin/ipuctl" \
        --admin-socket "$D/admin.sock" status >"$D/out" 2>"$D/err"
    check "ipuctl on an admin socket the user may not open exits 77" 77 $? "$D/err"
    has "  ... saying who may use it" "$D/err" "owned by"
else
    ok "ipuctl admin socket permissions # SKIP needs root and setpriv to act as another user"
fi

DATA=/usr/share/datasets/fashion-mnist
MN="$B/bin/ipuof-mnist"
start=$(date +%s)
"$MN" --data "$DATA" --epochs 1 --save "$D/no/such/dir/m.onnx" >"$D/out" 2>"$D/err"
check "ipuof-mnist --save into a missing directory exits 73" 73 $? "$D/err"
grep -q "compiled" "$D/out" && no "  ... before compiling" "$D/out" || ok "  ... before compiling"
"$MN" --data "$DATA" --epochs 1 --limit-train 1000 >"$D/out" 2>"$D/err"
check "ipuof-mnist --limit-train below one call exits 64" 64 $? "$D/err"
has "  ... naming the value that works" "$D/err" "use --limit-train 4000"
grep -q "compiled" "$D/out" && no "  ... before compiling" "$D/out" || ok "  ... before compiling"

has "ipuofd logs the simulator kernels' instruction set" "$D/log" "simulator kernels: "
IPUOF_SIM_ISA=avx3 "$B/bin/ipuofd" --listen 127.0.0.1:0 --admin-socket "$D/admin2.sock" \
    --foreground >"$D/out" 2>"$D/err"
check "ipuofd with IPUOF_SIM_ISA=avx3 exits 78 at start" 78 $? "$D/err"
has "  ... naming the levels" "$D/err" "use baseline, avx2 or avx512"

kill -TERM "$PID"; wait "$PID"; rc=$?; PID=""
check "ipuofd exits 0 on SIGTERM" 0 "$rc" "$D/log"
testd_sh_end
