#!/bin/sh
# The body that test_interop_torch.sh and test_interop_layers.sh share (not a test of its
# own): PYSCRIPT (in this directory) writes PyTorch's models, inputs and results into a
# fresh directory, a real ipuofd starts on an ephemeral loopback port, DRIVER
# (BUILD/tests/integ/DRIVER) runs the same on the daemon and prints its checks, and the
# daemon must exit 0 on SIGTERM. Debian's /usr/bin/python3 must have torch and onnx (make
# deps installs them; a python3 earlier on PATH may lack them): without them the test
# fails, it does not skip.
# Usage: sh tests/integ/interop_pair.sh BUILD PYSCRIPT DRIVER "what PYSCRIPT did"
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=$1 SCRIPT=$2 DRIVER=$3 WHAT=$4
PY=/usr/bin/python3
HERE=$(dirname "$0")
D=$(mktemp -d "/tmp/ipuof-${DRIVER}-XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT INT TERM
"$PY" -c "import torch, torch.onnx, onnx.numpy_helper" 2>/dev/null ||
    { echo "not ok - $PY cannot import torch and onnx.numpy_helper: install python3-torch and python3-onnx (make deps does)"; echo "0 passed, 1 failed"; exit 1; }

pass=0 fail=0
if "$PY" "$HERE/$SCRIPT" "$D/step" >"$D/py.out" 2>&1; then
    pass=$((pass + 1))
    echo "ok - PyTorch $WHAT: $(tail -n 1 "$D/py.out")"
else
    fail=$((fail + 1))
    echo "not ok - $SCRIPT failed: $(tail -n 5 "$D/py.out")"
fi

testd_sh_start "$B" "$D" ||
    { echo "not ok - ipuofd did not start: $(tail -n 3 "$D/log")"; echo "$pass passed, $((fail + 1)) failed"; exit 1; }

if [ "$fail" -eq 0 ]; then
    "$B/tests/integ/$DRIVER" "$D/step" >"$D/c.out" 2>&1
    rc=$?
    grep -v -E '^[0-9]+ passed, [0-9]+ failed' "$D/c.out"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$D/c.out" | tail -n 1)
    p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
    f=$(echo "$line" | sed -n 's/^[0-9]* passed, \([0-9]*\) failed.*/\1/p')
    pass=$((pass + ${p:-0}))
    fail=$((fail + ${f:-0}))
    if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
        fail=$((fail + 1))
        echo "not ok - $DRIVER exited with $rc"
    fi
fi

kill -TERM "$PID"
wait "$PID"
rc=$?
PID=""
if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); echo "ok - ipuofd exits 0 on SIGTERM";
else fail=$((fail + 1)); echo "not ok - ipuofd exited with $rc"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
