#!/bin/sh
# Real networks against PyTorch through a real ipuofd (tests/integ/torch_models.py):
# everyday layers (Upsample, ConvTranspose, LSTM, GRU, float %: inference, and one SGD step of a
# small classifier with loss and weights against PyTorch's), the torchvision
# classification models that fit the suite's time budget (batch 2, opset 13, eval,
# rtol 1e-3 / atol 1e-4; the smallest VisionTransformer too, whose LayerNorms and GELUs the
# compiler fuses) and one SGD step of resnet18, mobilenet_v3_small and the smallest
# VisionTransformer against PyTorch's. With "all" (make test-models) every torchvision
# model the op-coverage issue names and the same three SGD steps, one row per model. Debian's /usr/bin/python3 must have torch, torchvision and
# onnx (make deps installs them): without them the test fails.
# Usage: sh tests/integ/test_torchvision.sh [BUILD] [all]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
WHAT=${2:-suite}
PY=/usr/bin/python3
HERE=$(dirname "$0")
D=$(mktemp -d /tmp/ipuof-tv-XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT INT TERM
"$PY" -c "import torch, torch.onnx, torchvision, onnx.numpy_helper" 2>/dev/null ||
    { echo "not ok - $PY cannot import torch, torchvision and onnx.numpy_helper: install python3-torch, python3-torchvision and python3-onnx (make deps does)"; echo "0 passed, 1 failed"; exit 1; }

testd_sh_start "$B" "$D" ||
    { echo "not ok - ipuofd did not start: $(tail -n 3 "$D/log")"; echo "0 passed, 1 failed"; exit 1; }

if [ "$WHAT" = all ]; then
    set -- all train:resnet18 train:mobilenet_v3_small train:vit_small
else
    set -- layers train-layers suite vit_small train:resnet18 train:mobilenet_v3_small train:vit_small
fi
"$PY" "$HERE/torch_models.py" "$B" "$D" "$@" >"$D/py.out" 2>&1
rc=$?
grep -v -E '^[0-9]+ passed, [0-9]+ failed' "$D/py.out"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$D/py.out" | tail -n 1)
pass=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
fail=$(echo "$line" | sed -n 's/^[0-9]* passed, \([0-9]*\) failed.*/\1/p')
pass=${pass:-0}
fail=${fail:-0}
[ "$rc" -ne 0 ] && [ "$fail" -eq 0 ] && { fail=1; echo "not ok - torch_models.py exited with $rc"; }

kill -TERM "$PID"
wait "$PID"
rc=$?
PID=""
if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); echo "ok - ipuofd exits 0 on SIGTERM";
else fail=$((fail + 1)); echo "not ok - ipuofd exited with $rc"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
