#!/bin/sh
# Training exports with BatchNormalization and Dropout against PyTorch: for opsets 14
# (training_mode=1) and 13 (running statistics as extra outputs), with and without
# Dropout(p=0.5), tests/integ/interop_eval.py exports a small CNN for training;
# build/tests/integ/drv_interop_eval trains one SGD step on ipuofd and makes an inference
# model of it; interop_eval.py compares that model's outputs with PyTorch's eval() on the
# daemon's weights and, without Dropout, the step with PyTorch's. Debian's /usr/bin/python3
# must have torch and onnx (make deps installs them): without them the test fails.
# Usage: sh tests/integ/test_interop_eval.sh [BUILD]
set -u
# shellcheck source=tests/util/testd.sh
. "$(dirname "$0")/../util/testd.sh"
B=${1:-build}
PY=/usr/bin/python3
HERE=$(dirname "$0")
testd_sh_init eval
"$PY" -c "import torch, torch.onnx, onnx.numpy_helper" 2>/dev/null ||
    { not_ok "$PY cannot import torch and onnx.numpy_helper: install python3-torch and python3-onnx (make deps does)"; testd_sh_end; exit 1; }

testd_sh_must_start "$B" "$D"
set --
for opset in 14 13; do
    for drop in 1 0; do
        set -- "$@" "$D/o${opset}d$drop" "$opset" "$drop"
    done
done
if ! "$PY" "$HERE/interop_eval.py" export "$@" >"$D/py.out" 2>&1; then
    fail=$((fail + 1))
    echo "not ok - the exports failed: $(tail -n 5 "$D/py.out")"
fi
dirs=""
for W in "$D"/o*; do
    [ -f "$W/model.onnx" ] || continue
    echo "# $W"
    "$B/tests/integ/drv_interop_eval" "$W" >"$D/c.out" 2>&1
    testd_sh_add "$D/c.out"
    grep -q '^not ok' "$D/c.out" || dirs="$dirs $W"
done
if [ -n "$dirs" ]; then
    # shellcheck disable=SC2086
    "$PY" "$HERE/interop_eval.py" check $dirs >"$D/check.out" 2>&1
    grep '^# ' "$D/check.out"
    grep -E '^(ok|not ok) - ' "$D/check.out"
    p=$(grep -c '^ok - ' "$D/check.out")
    f=$(grep -c '^not ok - ' "$D/check.out")
    pass=$((pass + p))
    fail=$((fail + f))
    grep -q 'Traceback' "$D/check.out" && { fail=$((fail + 1)); tail -n 5 "$D/check.out"; }
fi
[ "$(ls -d "$D"/o* 2>/dev/null | wc -l)" -eq 4 ] || { fail=$((fail + 1)); echo "not ok - four exports expected"; }

testd_sh_stop
testd_sh_end
