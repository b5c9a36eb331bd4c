#!/bin/sh
# The everyday PyTorch layers against PyTorch: tests/integ/layers_torch.py exports one small
# model per layer (ELU, Hardswish at opsets 13 and 14, Softplus, split/chunk, logsumexp,
# norm, prod, torch.where with comparisons, argmax/argmin, default AvgPool2d, reflect /
# constant / replicate padding, mobilenet_v3's Hardswish + Hardsigmoid block; issue 19's
# GroupNorm, InstanceNorm2d, PReLU, SELU, CELU, maximum/minimum/clamp/sign/round/isnan,
# repeat, topk, tril/triu, PixelShuffle, cumsum, Conv3d) with PyTorch's outputs and SGD
# steps (one, two for Conv3d, three for GroupNorm, InstanceNorm2d and PReLU);
# build/tests/integ/drv_interop_layers runs each on a real ipuofd and compares the inference
# output (rtol 1e-3, atol 1e-4) and, for the differentiable ones, the loss of every step and
# every weight after the last (rtol 1e-4). Debian's /usr/bin/python3 must have torch and
# onnx (make deps installs them; a python3 earlier on PATH may lack them): without them the
# test fails, it does not skip. The steps: tests/integ/interop_pair.sh.
# Usage: sh tests/integ/test_interop_layers.sh [BUILD]
exec sh "$(dirname "$0")/interop_pair.sh" "${1:-build}" layers_torch.py drv_interop_layers \
    "exported the layer models and stepped them"
