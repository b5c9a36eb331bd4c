#!/bin/sh
# Interoperability with PyTorch: tests/integ/interop_torch.py defines the tutorial's MNIST
# network in PyTorch, exports it to ONNX and trains one AdamW step on one batch;
# build/tests/integ/drv_interop_step trains the same step on ipuofd from the exported model
# and compares the loss and every updated weight (rtol 1e-4). Debian's /usr/bin/python3
# must have torch and onnx (make deps installs them; a python3 earlier on PATH may lack
# them): without them the test fails, it does not skip. The steps: tests/integ/interop_pair.sh.
# Usage: sh tests/integ/test_interop_torch.sh [BUILD]
exec sh "$(dirname "$0")/interop_pair.sh" "${1:-build}" interop_torch.py drv_interop_step \
    "exported the model and trained one step"
