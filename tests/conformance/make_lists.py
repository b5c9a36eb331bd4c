#!/usr/bin/python3
"""Regenerates claimed.txt and skipped.txt from the ONNX node tests on this machine.

A node test is considered when every op of its graph is in the simulator's op table
(CLAIMED below, kept in sync with sim/{ops,nn}/op_*.c). It is claimed when all its inputs and outputs
use dtypes the simulator supports, and skipped (with the reason) otherwise or when it is
listed in MANUAL_SKIPS. Run from the repository root: tests/conformance/make_lists.py
"""
import os
import sys

import onnx
from onnx import TensorProto

NODE_DIR = "/usr/share/libonnx-testdata/data/node"
CLAIMED = set("""Abs Add AveragePool BatchNormalization Cast Clip Concat Constant Conv Div
Dropout Erf Exp Flatten Gather Gemm GlobalAveragePool Identity LayerNormalization LeakyRelu
Log LogSoftmax MatMul MaxPool Mul Neg Pow ReduceMax ReduceMean ReduceMin ReduceSum Relu
Reshape Shape Sigmoid Slice Softmax Sqrt Squeeze Sub Tanh Transpose Unsqueeze
Pad HardSigmoid HardSwish Elu Softplus Split ReduceLogSumExp ReduceL2 ReduceProd ReduceL1
ReduceSumSquare ArgMax ArgMin Greater Less Equal GreaterOrEqual LessOrEqual Not And Or Xor
Where ConstantOfShape Expand Range Mod ScatterND
ConvTranspose Resize Upsample LSTM GRU Floor Ceil
InstanceNormalization Max Min PRelu Selu Celu Sign Round IsNaN Tile DepthToSpace SpaceToDepth
Trilu CumSum TopK Loop If ScatterElements Scatter
Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh Reciprocal OneHot
RandomUniform RandomNormal RandomUniformLike RandomNormalLike""".split())
SUPPORTED = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.UINT8, TensorProto.INT8,
             TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL}
HALF_ONLY_CAST = ("float16 tensors reach only Cast, Identity, Shape and Size so far "
                  "(sim/README.md, Dtypes); other ops refuse them")
RANDOM = ("the expected output is a draw of the ONNX reference's generator (numpy); the "
          "simulator's generator draws others (its random ops are checked by their "
          "statistics and seeds in python/tests/test_random_ops.py)")
MANUAL_SKIPS = {
    "test_bernoulli_expanded": RANDOM,
    "test_bernoulli_double_expanded": RANDOM,
    "test_bernoulli_seed_expanded": RANDOM,
    "test_loop11": "Loop whose trip count and condition are graph inputs: loops are unrolled "
                   "when the model loads, so the trip count must be a Constant or initializer",
    "test_range_float_type_positive_delta_expanded": "Loop whose trip count is computed from "
                                                     "graph inputs: loops are unrolled when "
                                                     "the model loads",
    "test_range_int32_type_negative_delta_expanded": "Loop whose trip count is computed from "
                                                     "graph inputs: loops are unrolled when "
                                                     "the model loads",
    "test_training_dropout": "training-mode Dropout with ratio 0.75: the mask comes from "
                             "numpy's random generator, which the simulator does not replicate",
    "test_training_dropout_default": "training-mode Dropout with ratio 0.5: the mask comes "
                                     "from numpy's random generator",
    "test_training_dropout_default_mask": "training-mode Dropout with ratio 0.5: the mask comes "
                                          "from numpy's random generator",
    "test_max_float16": HALF_ONLY_CAST,
    "test_min_float16": HALF_ONLY_CAST,
    "test_mod_mixed_sign_float16": HALF_ONLY_CAST,
    "test_training_dropout_mask": "training-mode Dropout with ratio 0.75: the mask comes from "
                                  "numpy's random generator",
}
WINDOW = ("the expected output is off the exact window by up to 7e-5 (test_hannwindow_expanded "
          "element 2: 0.3454739 where 0.5 - 0.5 cos(2 pi 2 / 10) is 0.3454915); the "
          "simulator's is within 1e-6 of the exact value")
for _w in ("blackman", "hamming", "hann"):
    MANUAL_SKIPS["test_%swindow_expanded" % _w] = WINDOW
    MANUAL_SKIPS["test_%swindow_symmetric_expanded" % _w] = WINDOW


def graph_ops(graph):
    """The op types of graph and of its subgraphs (Loop's body, If's branches)."""
    ops = set()
    for n in graph.node:
        ops.add(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops |= graph_ops(a.g)
    return ops


def value_types(graph):
    for v in list(graph.input) + list(graph.output):
        t = v.type
        if t.HasField("tensor_type"):
            yield v.name, t.tensor_type.elem_type
        else:
            yield v.name, None


def main():
    claimed, skipped = [], []
    for test in sorted(os.listdir(NODE_DIR)):
        model = onnx.load(os.path.join(NODE_DIR, test, "model.onnx"))
        ops = graph_ops(model.graph)
        if not ops or not ops <= CLAIMED:
            continue
        bad = [(n, t) for n, t in value_types(model.graph) if t not in SUPPORTED]
        if test in MANUAL_SKIPS:
            skipped.append((test, MANUAL_SKIPS[test]))
        elif bad:
            name, t = bad[0]
            what = "a non-tensor type" if t is None else \
                "dtype " + TensorProto.DataType.Name(t).lower()
            skipped.append((test, "'%s' has %s, which the simulator does not support"
                            % (name, what)))
        else:
            claimed.append(test)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "claimed.txt"), "w") as f:
        f.write("".join(t + "\n" for t in claimed))
    with open(os.path.join(here, "skipped.txt"), "w") as f:
        f.write("".join("%s  %s\n" % (t, r) for t, r in skipped))
    print("%d claimed, %d skipped" % (len(claimed), len(skipped)), file=sys.stderr)


if __name__ == "__main__":
    main()
