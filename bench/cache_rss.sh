#!/bin/sh
# The executable cache's memory (issue 17 defect 5): three clients one after another, each
# running its own model with a [8192, 8192] float weight (256 MiB) through ipuof-run and
# leaving; prints the daemon's VmRSS after start and after each client, and the evictions
# it logged. Debian's python3 with numpy and onnx writes the models.
# Usage: sh bench/cache_rss.sh [BUILD] [DAEMON_BIN]     (about 1.5 GB of memory, 800 MB of /tmp)
set -u
B=${1:-build}
DAEMON=${2:-$B/bin/ipuofd}
D=$(mktemp -d /tmp/ipuof-cache-rss-XXXXXX)
P=""
trap '[ -n "$P" ] && kill "$P" 2>/dev/null; rm -rf "$D"' EXIT INT TERM
/usr/bin/python3 - "$D" <<'PY' || exit 1
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
for i in range(3):
    w = np.full((8192, 8192), 0.001 * (i + 1), dtype=np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8192])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8192])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, f"{d}/m{i}.onnx")
x = numpy_helper.from_array(np.ones((1, 8192), np.float32), "x")
open(f"{d}/x.pb", "wb").write(x.SerializeToString())
PY
"$DAEMON" --listen 127.0.0.1:0 --port-file "$D/port" --foreground --admin-socket "$D/a.sock" \
    >"$D/log" 2>&1 &
P=$!
i=0
while [ ! -s "$D/port" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
[ -s "$D/port" ] || { echo "ipuofd did not start: $(cat "$D/log")"; exit 1; }
rss() { awk '/VmRSS/ {printf "%d MB", $2 / 1024}' "/proc/$P/status"; }
echo "daemon started: VmRSS $(rss)"
for i in 0 1 2; do
    "$B/bin/ipuof-run" --server "127.0.0.1:$(cat "$D/port")" --model "$D/m$i.onnx" \
        --input "x=$D/x.pb" --quiet >/dev/null 2>"$D/err" || { cat "$D/err"; exit 1; }
    echo "after client $((i + 1)): VmRSS $(rss)"
done
echo "evictions logged: $(grep -c 'executable cache: evicted' "$D/log")"
grep -m1 'executable cache: evicted' "$D/log"
