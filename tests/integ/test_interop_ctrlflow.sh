#!/bin/sh
# Control flow and the scatter / max-reduction ops against PyTorch: tests/integ/
# ctrlflow_torch.py exports a TorchScript loop (ONNX Loop) and if (ONNX If), scatter,
# scatter_add and amax/amin models with PyTorch's outputs and SGD steps;
# build/tests/integ/drv_interop_layers runs each on a real ipuofd and compares the inference
# output and the loss of every step and every weight after the last, as
# test_interop_layers.sh does. The steps: tests/integ/interop_pair.sh.
# Usage: sh tests/integ/test_interop_ctrlflow.sh [BUILD]
exec sh "$(dirname "$0")/interop_pair.sh" "${1:-build}" ctrlflow_torch.py drv_interop_layers \
    "exported the control-flow and scatter models and stepped them"
