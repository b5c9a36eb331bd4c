"""float16 rows of the model benchmark (`make bench-models`, issue 27 item 3): ResNet-50 and
a small transformer, training and inference, float16 through ipuofd against ipuofd float32
and PyTorch float32 at its best of 1 and 2 threads (OPENBLAS_NUM_THREADS=1).

Micro-batch 4 (ResNet-50 at 224x224; the transformer: 4 sequences of 128 tokens, width
256, 4 heads, 2 layers, 1000 classes). float16 as Graphcore's published configurations set
it: the model's parameters and input float16, every op rounding its result to float16,
half partials (metadata ipuof.partials_type = half) and stochastic rounding
(ipuof.stochastic_rounding = 1); the model typed by the Python package's own
capture.type_float16, so the graph is the one a PopTorch user's .half() model sends.
Training: one SGD step (lr 0.01) per micro-batch, cross-entropy loss (float), 4 steps per
call; inference: 4 micro-batches per call (`ipuof-run --device-iterations 4`). PyTorch
trains the same network in float32 (torch.optim.SGD), eval() under inference_mode for
inference.
Environment: BENCH_HALF_MODELS (comma list of resnet50,transformer; empty: none).
Timings are reported, never judged.
"""
import io
import os
import statistics
import sys
import time

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper
from torch.fx.experimental.optimization import fuse

MB, DI = 4, 4
SEQ, WIDTH, HEADS, LAYERS, VOCAB, CLASSES = 128, 256, 4, 2, 1000, 1000


class Block(torch.nn.Module):
    """One pre-norm transformer encoder layer, in plain ops (what exports to ONNX as
    MatMul, Softmax, LayerNormalization, Gelu's Erf)."""

    def __init__(self):
        super().__init__()
        self.n1 = torch.nn.LayerNorm(WIDTH)
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.n2 = torch.nn.LayerNorm(WIDTH)
        self.fc1 = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.fc2 = torch.nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(b, s, 3, HEADS, WIDTH // HEADS).permute(
            2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) * (WIDTH // HEADS) ** -0.5, dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, WIDTH))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.n2(x))))


class Transformer(torch.nn.Module):
    """Embedded tokens (given as float embeddings: the input is float16 on the device)
    through LAYERS blocks, mean-pooled, classified."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        return self.head(self.norm(self.blocks(x)).mean(dim=1))


class WithLoss(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, labels):
        return torch.nn.functional.cross_entropy(self.net(x), labels)


def make(name, mb=MB, size=224):
    """(network in eval mode, a micro-batch input of mb, images size x size) for name,
    seed 0."""
    torch.manual_seed(0)
    if name == "transformer":
        return Transformer().eval(), torch.randn(mb, SEQ, WIDTH)
    return (getattr(torchvision.models, name)(weights=None).eval(),
            torch.randn(mb, 3, size, size))


def export(name, train, half, path, mb=MB, size=224):
    """Writes the ONNX model of name (with its loss when train; typed float16 with half
    partials and stochastic rounding when half) to path; returns (model, x, labels)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "python"))
    from ipuof._half import type_float16
    model, x = make(name, mb, size)
    labels = torch.randint(0, CLASSES, (mb,))
    if name != "transformer":
        model = fuse(model)     # what the exporter does to BatchNorm in eval mode
    b = io.BytesIO()
    if train:
        torch.onnx.export(WithLoss(model), (x, labels), b, opset_version=13,
                          input_names=["input", "labels"], output_names=["loss"])
    else:
        torch.onnx.export(model, x, b, opset_version=13, input_names=["input"],
                          output_names=["output"])
    data = b.getvalue()
    if half:
        state = [t.name for t in onnx.load_from_string(data).graph.initializer]
        data, _ = type_float16(data, ["input"], state,
                               keep_float=["loss"] if train else (),
                               stochastic=train, partials_half=True)
    with open(path, "wb") as f:
        f.write(data)
    return model, x, labels


def bench(name, train, wd, ipu_run, rounds, t2, isa):
    """Prints and returns the row of name (training or inference): samples/s of ipuofd
    float16, ipuofd float32, PyTorch float32 on 1 and t2 threads (medians)."""
    mode = "training" if train else "inference"
    paths = {}
    for half in (True, False):
        p = os.path.join(wd, "%s_%s_%s.onnx" % (name, mode, "f16" if half else "f32"))
        model, x, labels = export(name, train, half, p)
        paths[half] = p
        xin = os.path.join(wd, "%s_in_%s.pb" % (name, "f16" if half else "f32"))
        onnx.save_tensor(numpy_helper.from_array(
            x.numpy().astype(np.float16 if half else np.float32), "input"), xin)
        paths[(half, "in")] = xin
    lab = os.path.join(wd, name + "_labels.pb")
    onnx.save_tensor(numpy_helper.from_array(labels.numpy(), "labels"), lab)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def ipuofd(half):
        def run():
            extra = ["--input", "labels=" + lab, "--loss", "loss"] if train else []
            return ipu_run(paths[half], ["--input", paths[(half, "in")]] + extra +
                           ["--device-iterations", str(DI)])
        return run

    def torch_at(threads):
        def run():
            torch.set_num_threads(threads)
            t = time.perf_counter()
            for _ in range(DI):
                if train:
                    model.train()
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), labels).backward()
                    opt.step()
                else:
                    with torch.inference_mode():
                        model(x)
            return MB * DI / (time.perf_counter() - t)
        return run

    sides = {"f16": ipuofd(True), "f32": ipuofd(False), "t1": torch_at(1), "t2": torch_at(t2)}
    for f in sides.values():    # warm-up (and the compiles)
        f()
    rates = {k: [] for k in sides}
    for _ in range(rounds):
        for k, f in sides.items():
            rates[k].append(f())
    med = {k: statistics.median(v) for k, v in rates.items()}
    best = max(med["t1"], med["t2"])
    row = dict(name=name, mode=mode, f16=med["f16"], f32=med["f32"], t1=med["t1"],
               t2=med["t2"], vs32=med["f16"] / med["f32"], vstorch=med["f16"] / best)
    print("%s %s float16 (half partials, %s): ipuofd float16 %.2f samples/s, ipuofd float32 "
          "%.2f, pytorch float32 %.2f (1 thread) %.2f (%d threads); float16 / ipuofd float32 "
          "%.2fx, / pytorch's best %.2fx (targets >= 1.0x); %s" %
          (name, mode, "stochastic rounding" if train else "nearest-even", med["f16"],
           med["f32"], med["t1"], med["t2"], t2, row["vs32"], row["vstorch"], isa))
    return row


def run_all(wd, ipu_run, rounds, t2, isa):
    """The float16 rows for BENCH_HALF_MODELS (default resnet50,transformer), printed as a
    table at the end; returns them."""
    names = [n for n in os.environ.get("BENCH_HALF_MODELS",
                                       "resnet50,transformer").split(",") if n]
    rows = [bench(n, train, wd, ipu_run, rounds, t2, isa) for n in names
            for train in (True, False)]
    if rows:
        print()
        print("float16 (samples/s, micro-batch %d, medians over %d rounds; %s):" %
              (MB, rounds, isa))
        print("| model | mode | ipuofd float16 | ipuofd float32 | PyTorch float32 1 thread | "
              "PyTorch float32 %d threads | float16 / ipuofd float32 | float16 / PyTorch's "
              "best |" % t2)
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" %
                  (r["name"], r["mode"], r["f16"], r["f32"], r["t1"], r["t2"], r["vs32"],
                   r["vstorch"]))
    return rows


if __name__ == "__main__":
    # python3 bench/half_models.py NAME OUT.onnx [train] [f32] [MB] [SIZE]: one model as the
    # rows export it (for bench/ipuof-cpu and callgrind), e.g. resnet18 r.onnx train 2 64
    a = sys.argv[1:]
    nums = [int(v) for v in a[2:] if v.isdigit()]
    export(a[0], "train" in a, "f32" not in a, a[1], *(nums + [MB, 224][len(nums):]))
