"""PyTorch's side of test_interop_layers.sh: the everyday layers, exported and stepped.

Usage: /usr/bin/python3 tests/integ/layers_torch.py OUTDIR

For every case below (a small model around one everyday PyTorch layer), exports
forward(x, target) -> (y, loss) to ONNX with torch.onnx.export at the case's opset
(parameters as initializers, loss = mean squared error of y against target; inference-only
cases export forward(x) -> y), and writes into OUTDIR/<case>/ as ONNX TensorProto files:

  model.onnx                 the exported model, initial weights included
  input_K.pb                 graph input K in graph order, named as the input
  y.pb                       PyTorch's y for those inputs (eval() forward, before the step)
  loss.pb                    (training cases) the loss of the first SGD step, float []
  initial_K.pb, weight_K.pb  (training cases) each initializer K before and after the
                             case's steps (one unless it says) of torch.optim.SGD(lr=0.1)
  loss_S.pb                  (cases of several steps) the loss of step S = 1, 2, ...

OUTDIR/cases.txt lists "<case> train <steps>" or "<case> infer", one per line. The C side
(build/tests/integ/drv_interop_layers OUTDIR) runs each model on ipuofd and compares.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

LR = 0.1


class Head(torch.nn.Module):
    """Linear(6, 8) followed by the layer under test (fn)."""

    def __init__(self, fn, out=8):
        super().__init__()
        self.fc = torch.nn.Linear(6, out)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.fc(x))


class SplitChunk(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 9)

    def forward(self, x):
        h = self.fc(x)
        a, b = torch.split(h, [3, 6], dim=1)
        c, d, e = torch.chunk(b, 3, dim=1)
        return torch.cat([e * 2.0, a.tanh(), c * d], dim=1)


class WhereCmp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 8)

    def forward(self, x):
        h = self.fc(x)
        y = torch.where(h > 0.1, h, torch.where(h <= -0.2, h * 2.0, h * 0.5))
        y = torch.where(h < -0.6, h * h, y)
        return torch.where(x[:, :1] == x[:, 1:2], h, y) + (h >= 0).float()


class Pool(torch.nn.Module):
    """Conv then PyTorch's default AvgPool2d (count_include_pad=True: Pad + AveragePool)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3)
        self.pool = torch.nn.AvgPool2d(3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(self.conv(x))


class PadModes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 3)
        self.reflect = torch.nn.ReflectionPad2d((2, 1, 1, 2))
        self.edge = torch.nn.ReplicationPad2d((1, 2, 2, 1))

    def forward(self, x):
        h = self.conv(x)
        return self.reflect(h) * 0.5 + F.pad(h, (2, 1, 1, 2), value=0.25) + self.edge(h)


class MobileBlock(torch.nn.Module):
    """mobilenet_v3_small's pieces: Conv, Hardswish, squeeze-excitation with Hardsigmoid."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.act = torch.nn.Hardswish()
        self.fc1 = torch.nn.Conv2d(8, 4, 1)
        self.fc2 = torch.nn.Conv2d(4, 8, 1)
        self.gate = torch.nn.Hardsigmoid()

    def forward(self, x):
        h = self.act(self.conv(x) * 3.0)
        s = F.adaptive_avg_pool2d(h, 1)
        s = self.gate(self.fc2(F.relu(self.fc1(s))) * 3.0)
        return (h * s).flatten(1)


class ArgExt(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 8)

    def forward(self, x):
        h = self.fc(x)
        return torch.stack([h.argmax(dim=1), h.argmin(dim=-1)], dim=1)


class GroupNormNet(torch.nn.Module):
    """Conv, GroupNorm (exported as Reshape, InstanceNormalization, Reshape, Mul, Add), ReLU:
    the block of Graphcore's basics tutorial."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.norm = torch.nn.GroupNorm(4, 8)

    def forward(self, x):
        return F.relu(self.norm(self.conv(x))).flatten(1)


class InstNormNet(torch.nn.Module):
    """Conv without a bias: InstanceNorm2d takes away any per-channel constant, so a conv
    bias's true gradient is zero and its step only a rounding remainder."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, bias=False)
        self.norm = torch.nn.InstanceNorm2d(4, affine=True)

    def forward(self, x):
        return self.norm(self.conv(x)).flatten(1)


class PixelShuffleNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 8, 1)
        self.shuffle = torch.nn.PixelShuffle(2)

    def forward(self, x):
        return self.shuffle(self.conv(x)).flatten(1)


class Conv3dNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(2, 4, (2, 3, 3), stride=(1, 2, 1), padding=1, groups=2)
        self.conv2 = torch.nn.Conv3d(4, 3, 1)

    def forward(self, x):
        return self.conv2(F.relu(self.conv(x))).flatten(1)


def elementwise_mix(h):
    """Sign, Round, IsNaN, Max (clamp with a tensor bound) and Min in one expression."""
    a, b = h[:, :4], h[:, 4:]
    y = torch.maximum(a, b) * 2.0 + torch.minimum(a, b) + torch.clamp(a, min=b * 0.5)
    y = y + torch.sign(a) * b + torch.round(b * 3.0) * 0.25
    return torch.where(torch.isnan(y), torch.zeros_like(y), y)


def cases():
    """(name, opset, module, x shape, train steps (0: inference only))"""
    return [
        ("elu", 13, Head(torch.nn.ELU(alpha=0.7)), (4, 6), 1),
        ("hardswish_opset13", 13, Head(lambda h: torch.nn.Hardswish()(h * 4.0)), (4, 6), 1),
        ("hardswish_opset14", 14, Head(lambda h: torch.nn.Hardswish()(h * 4.0)), (4, 6), 1),
        ("softplus", 13, Head(torch.nn.Softplus()), (4, 6), 1),
        ("split_chunk", 13, SplitChunk(), (4, 6), 1),
        ("logsumexp", 13, Head(lambda h: torch.logsumexp(h, dim=1, keepdim=True)), (4, 6), 1),
        ("norm", 13, Head(lambda h: h.norm(2, dim=1)), (4, 6), 1),
        ("prod", 13, Head(lambda h: torch.prod(h, dim=1)), (4, 6), 1),
        ("where_compare", 13, WhereCmp(), (4, 6), 1),
        ("avgpool_default", 13, Pool(), (2, 2, 9, 8), 1),
        ("pad_modes", 13, PadModes(), (2, 2, 8, 8), 1),
        ("mobilenet_v3_block", 13, MobileBlock(), (2, 3, 6, 6), 1),
        ("argmax_argmin", 13, ArgExt(), (5, 6), 0),
        # issue 19's ops
        ("groupnorm", 14, GroupNormNet(), (2, 3, 6, 6), 3),
        ("instancenorm", 14, InstNormNet(), (2, 2, 5, 5), 3),
        ("prelu", 14, Head(torch.nn.PReLU(8)), (4, 6), 3),
        ("prelu_one_slope", 14, Head(torch.nn.PReLU()), (4, 6), 1),
        ("selu", 14, Head(torch.nn.SELU()), (4, 6), 1),
        ("celu", 14, Head(torch.nn.CELU(0.5)), (4, 6), 1),
        ("elementwise_mix", 14, Head(elementwise_mix), (5, 6), 1),
        ("repeat", 14, Head(lambda h: h.repeat(2, 3) * 0.5), (4, 6), 1),
        ("topk", 14, Head(lambda h: torch.topk(h, 3, dim=1).values), (4, 6), 1),
        ("topk_smallest", 14, Head(lambda h: torch.topk(h, 2, dim=0, largest=False)[0]),
         (4, 6), 1),
        ("tril_triu", 14, Head(lambda h: torch.tril(h.reshape(4, 2, 4), 1) +
                                torch.triu(h.reshape(4, 2, 4), -1) * 2.0), (4, 6), 1),
        ("pixel_shuffle", 14, PixelShuffleNet(), (2, 2, 3, 4), 1),
        ("cumsum", 14, Head(lambda h: torch.cumsum(h, 1) + torch.cumsum(h, 0).flip(0)),
         (4, 6), 1),
        ("conv3d", 14, Conv3dNet(), (2, 2, 3, 5, 4), 2),
    ]


class WithLoss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, target):
        y = self.model(x)
        return y, ((y - target) * (y - target)).mean()


def write(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def export_case(out, name, opset, model, xshape, steps):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    x = torch.randn(*xshape)
    if name == "where_compare":
        x[1, 1] = x[1, 0]           # one row takes the Equal branch
    path = os.path.join(d, "model.onnx")
    with torch.no_grad():
        y = model(x)
    if steps == 0:
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                          opset_version=opset, do_constant_folding=False)
        write(os.path.join(d, "input_0.pb"), x.numpy(), "x")
        write(os.path.join(d, "y.pb"), y.numpy(), "y")
        return
    target = torch.randn(*y.shape)
    wrapped = WithLoss(model)
    torch.onnx.export(wrapped, (x, target), path, input_names=["x", "target"],
                      output_names=["y", "loss"], opset_version=opset,
                      do_constant_folding=False)
    inits = [t.name for t in onnx.load(path).graph.initializer]
    params = dict(wrapped.named_parameters())
    if sorted(inits) != sorted(params):
        sys.exit("%s: initializers %s are not the parameters %s" % (name, inits, list(params)))
    write(os.path.join(d, "input_0.pb"), x.numpy(), "x")
    write(os.path.join(d, "input_1.pb"), target.numpy(), "target")
    write(os.path.join(d, "y.pb"), y.numpy(), "y")
    for k, n in enumerate(inits):
        write(os.path.join(d, "initial_%d.pb" % k), params[n].detach().numpy(), n)
    opt = torch.optim.SGD(wrapped.parameters(), lr=LR)
    for step in range(steps):
        opt.zero_grad()
        _, loss = wrapped(x, target)
        loss.backward()
        opt.step()
        write(os.path.join(d, "loss.pb" if step == 0 else "loss_%d.pb" % step),
              loss.detach().numpy().astype(np.float32), "loss")
    for k, n in enumerate(inits):
        write(os.path.join(d, "weight_%d.pb" % k), params[n].detach().numpy(), n)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    lines = []
    for name, opset, model, xshape, steps in cases():
        export_case(out, name, opset, model, xshape, steps)
        lines.append("%s train %d\n" % (name, steps) if steps else "%s infer\n" % name)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("".join(lines))
    print("exported %d cases" % len(lines))


if __name__ == "__main__":
    main()
