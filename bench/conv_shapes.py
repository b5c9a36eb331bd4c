#!/usr/bin/env python3
"""Per-layer CPU seconds of the simulator's two convolutions, to choose between them.

For every distinct Conv of the given ONNX models (shapes from ONNX shape inference, batch
fixed to --batch), builds a one-node model with random weights and runs it with
BUILD/bench/ipuof-cpu (bench/models.py builds it) twice, on --threads host threads (default
1): once with the hand-written kernels (IPUOF_SIM_CONV=own) and once through oneDNN
(IPUOF_SIM_CONV=dnnl). Prints one line per shape (least CPU seconds of --rounds runs, and
own/dnnl), with the shape's class as op_conv.c's rule sees it, then the per-class totals.

With --train the model is a training step instead: x + z (z a (1, C, 1, 1) weight, so the
convolution's input gradient is wanted), the Conv, loss = ReduceSum(y); the two runs force
the backward only (IPUOF_SIM_CONV_BWD=own / =dnnl) and the forward follows its rule (which
keeps the forward's im2col matrices for the hand-written weight gradient where they fit).
The figure is a whole step (forward, backward, SGD update), so own/dnnl is the layer's
training cost under each backward; a third run (IPUOF_SIM_CONV_BWD=data) takes the input
gradient from oneDNN and the weight gradient from the hand-written kernels.

  /usr/bin/python3 bench/conv_shapes.py --build build /tmp/pm/resnet18.onnx ...
  /usr/bin/python3 bench/conv_shapes.py --build build --tutorial      (the MNIST CNN, batch 40)
  /usr/bin/python3 bench/conv_shapes.py --build build --train --threads 2 /tmp/pm/resnet18.onnx
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference, TensorProto


def attrs_of(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def conv_shapes(path, batch):
    """(x_shape, w_shape, attrs, has_bias) of each Conv of the model at path."""
    m = onnx.load(path)
    m = shape_inference.infer_shapes(m)
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims = [d.dim_value if d.dim_value > 0 else batch for d in vi.type.tensor_type.shape.dim]
        shapes[vi.name] = dims
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    out = []
    for n in m.graph.node:
        if n.op_type != "Conv" or n.input[0] not in shapes or n.input[1] not in shapes:
            continue
        x = list(shapes[n.input[0]])
        x[0] = batch
        out.append((tuple(x), tuple(shapes[n.input[1]]), attrs_of(n),
                    len(n.input) > 2 and n.input[2] != ""))
    return out


def klass(x, w, a):
    g = a.get("group", 1)
    c, m, kh, kw = x[1], w[0], w[2], w[3]
    if g > 1 and c // g == 1:
        return "depthwise k%d" % kh
    if kh == 1 and kw == 1 and max(a.get("strides", [1])) == 1:
        return "pointwise"
    return "k%d cin%s" % (kh, "<8" if c // g < 8 else ">=8")


def one_conv_model(x, w, a, bias, path, train=False):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(w).astype(np.float32) * 0.1, "W")]
    ins = ["XZ" if train else "X", "W"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(w[0]).astype(np.float32), "B"))
        ins.append("B")
    nodes = [helper.make_node("Conv", ins, ["Y"], **a)]
    out = "Y"
    if train:
        inits.append(numpy_helper.from_array(np.zeros((1, x[1], 1, 1), np.float32), "Z"))
        nodes.insert(0, helper.make_node("Add", ["X", "Z"], ["XZ"]))
        nodes.append(helper.make_node("ReduceSum", ["Y"], ["loss"], keepdims=0))
        out = "loss"
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                       list(x))],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def cpu_s(tool, path, batch, rounds, mode, threads, train):
    env = dict(os.environ, IPUOF_SIM_THREADS=str(threads), OMP_NUM_THREADS="1")
    env["IPUOF_SIM_CONV_BWD" if train else "IPUOF_SIM_CONV"] = mode
    r = subprocess.run([tool, path, str(batch), str(rounds)] + (["loss"] if train else []),
                       env=env, capture_output=True, text=True, check=True)
    return float(r.stdout.split()[0].split("=")[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tutorial", action="store_true")
    ap.add_argument("--train", action="store_true", help="time training steps, backward forced")
    ap.add_argument("--threads", type=int, default=1, help="IPUOF_SIM_THREADS of the runs")
    ap.add_argument("models", nargs="*")
    o = ap.parse_args()
    tool = os.path.join(o.build, "bench", "ipuof-cpu")
    if not os.path.exists(tool):
        sys.exit("conv_shapes: %s is missing (make bench-models builds it)" % tool)
    todo = []
    if o.tutorial:
        o.batch = 40 if o.batch == 8 else o.batch
        todo += [((o.batch, 1, 28, 28), (10, 1, 5, 5), {}, True),
                 ((o.batch, 10, 12, 12), (20, 10, 5, 5), {}, True)]
    for p in o.models:
        todo += conv_shapes(p, o.batch)
    seen, tot = set(), {}
    with tempfile.TemporaryDirectory() as wd:
        path = os.path.join(wd, "c.onnx")
        for x, w, a, b in todo:
            key = repr((x, w, sorted(a.items()), b))
            if key in seen:
                continue
            seen.add(key)
            one_conv_model(x, w, a, b, path, o.train)
            own = cpu_s(tool, path, x[0], o.rounds, "own", o.threads, o.train)
            dnn = cpu_s(tool, path, x[0], o.rounds, "dnnl", o.threads, o.train)
            dat = cpu_s(tool, path, x[0], o.rounds, "data", o.threads, o.train) if o.train \
                else 0.0
            k = klass(x, w, a)
            t = tot.setdefault(k, [0.0, 0.0, 0.0])
            t[0] += own
            t[1] += dnn
            t[2] += dat
            print("%-16s x=%-20s w=%-18s s=%s g=%d  own %.5f  dnnl %.5f  own/dnnl %.2f%s" %
                  (k, x, w, a.get("strides", [1, 1]), a.get("group", 1), own, dnn,
                   own / max(dnn, 1e-5), "  data %.5f  own/data %.2f" %
                   (dat, own / max(dat, 1e-5)) if o.train else ""), flush=True)
    print("\nper class (sum of distinct shapes):")
    for k, (a, b, c) in sorted(tot.items()):
        print("  %-16s own %.4f  dnnl %.4f  own/dnnl %.2f%s" %
              (k, a, b, a / max(b, 1e-5),
               "  data %.4f  own/data %.2f" % (c, a / max(c, 1e-5)) if o.train else ""))


if __name__ == "__main__":
    main()
