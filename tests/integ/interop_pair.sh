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
testd_sh_init "$DRIVER"
"$PY" -c "import torch, torch.onnx, onnx.numpy_helper" 2>/dev/null ||
    { not_ok "$PY cannot import torch and onnx.numpy_helper: install python3-torch and python3-onnx (make deps does)"; testd_sh_end; exit 1; }

if "$PY" "$HERE/$SCRIPT" "$D/step" >"$D/py.out" 2>&1; then
    pass=$((pass + 1))
    echo "ok - PyTorch $WHAT: $(tail -n 1 "$D/py.out")"
else
    fail=$((fail + 1))
    echo "not ok - $SCRIPT failed: $(tail -n 5 "$D/py.out")"
fi

testd_sh_must_start "$B" "$D"

if [ "$fail" -eq 0 ]; then
    "$B/tests/integ/$DRIVER" "$D/step" >"$D/c.out" 2>&1
    testd_sh_add "$D/c.out" $? "$DRIVER"
fi

testd_sh_stop
testd_sh_end
