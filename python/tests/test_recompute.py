"""Recomputation against a real ipuofd (docs/memory.md): a residual CNN with
recomputationCheckpoint trained for a few steps with autoRecomputation 4 (RecomputeAll),
1 (Standard) and 2 (NormOnly) ends with weights bit-identical to autoRecomputation 0 (and
to the same model without checkpoints); a two-IPU pipeline with PopTorch's default
(Pipeline recomputation) bit-identical to autoRecomputation 0; the markers become PopART's
attributes and the options the graph's metadata; a bad autoRecomputation is refused."""
import copy
import io

import pytest
import torch
import torch.nn as nn

import poptorch
from ipuof import _recompute, poptorch_core

STEPS = 3


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class Net(nn.Module):
    def __init__(self, checkpoints=True, c=8):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.ModuleList([Block(c) for _ in range(3)])
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(c * 8 * 8, 5)
        self.checkpoints = checkpoints

    def forward(self, x, y):
        x = torch.relu(self.stem(x))
        for b in self.blocks:
            x = b(x)
            if self.checkpoints:
                x = poptorch.recomputationCheckpoint(x)
        out = self.fc(self.drop(x).flatten(1))
        return out, nn.functional.cross_entropy(out, y)


def data(n):
    g = torch.Generator().manual_seed(3)
    return torch.randn(n, 3, 8, 8, generator=g), torch.randint(0, 5, (n,), generator=g)


def train(model, opts):
    """The model's state after STEPS calls of a training model with opts."""
    m = copy.deepcopy(model)
    pm = poptorch.trainingModel(m, opts, torch.optim.SGD(m.parameters(), lr=0.05,
                                                         momentum=0.9))
    n = opts.Training.gradient_accumulation * 2
    x, y = data(n)
    for _ in range(STEPS):
        pm(x, y)
    pm.copyWeightsToHost()
    state = {k: v.detach().clone() for k, v in m.state_dict().items()}
    pm.destroy()
    return state


def options(mode=None, accumulation=2):
    opts = poptorch.Options()
    opts.randomSeed(5)
    opts.Training.gradientAccumulation(accumulation)
    if mode is not None:
        opts._Popart.set("autoRecomputation", mode)
    return opts


def assert_same(a, b, what):
    for k in a:
        assert torch.equal(a[k], b[k]), f"{what}: {k} differs from the run without " \
            "recomputation"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_modes_bit_identical(daemon):
    torch.manual_seed(0)
    model = Net()
    none = train(model, options(0))
    plain = Net(checkpoints=False)
    plain.load_state_dict(model.state_dict())
    assert_same(none, train(plain, options(0)), "no checkpoints")
    for mode in (4, 1, 2):
        assert_same(none, train(model, options(mode)), f"autoRecomputation {mode}")
    # the weights moved: the comparison is not of untrained models
    assert not torch.equal(none["fc.weight"], model.state_dict()["fc.weight"])


class TwoStages(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = poptorch.BeginBlock(nn.Sequential(nn.Linear(16, 32), nn.ReLU(),
                                                   nn.Linear(32, 32), nn.Tanh()), ipu_id=0)
        self.b = poptorch.BeginBlock(nn.Linear(32, 4), ipu_id=1)

    def forward(self, x, y):
        out = self.b(self.a(x))
        return out, nn.functional.cross_entropy(out, y)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_pipeline_default_bit_identical(daemon):
    torch.manual_seed(1)
    model = TwoStages()
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)

    def run(mode):
        m = copy.deepcopy(model)
        opts = options(mode, accumulation=4)
        pm = poptorch.trainingModel(m, opts, torch.optim.SGD(m.parameters(), lr=0.1))
        for _ in range(STEPS):
            pm(x, y)
        pm.copyWeightsToHost()
        s = {k: v.detach().clone() for k, v in m.state_dict().items()}
        pm.destroy()
        return s

    none, default = run(0), run(None)
    assert_same(none, default, "pipelined, PopTorch's default (Pipeline)")
    assert not torch.equal(none["b.weight"], model.state_dict()["b.weight"])


def test_markers_become_attributes():
    import onnx
    model = Net()
    opts = options(4)
    opts.setAvailableMemoryProportion({"IPU0": 0.16})
    opts.TensorLocations.numIOTiles(64)
    x, y = data(2)
    f = io.BytesIO()
    with poptorch_core._capturing():
        torch.onnx.export(model, (x, y), f, opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    out = onnx.load_from_string(_recompute.annotate(f.getvalue(), opts, True))
    assert not any(n.op_type == _recompute.CHECKPOINT for n in out.graph.node)
    marked = [n for n in out.graph.node if any(
        a.name == "__recompute_output_in_backward" and a.i == 1 for a in n.attribute)]
    assert len(marked) == 3, [n.name for n in marked]
    meta = {p.key: p.value for p in out.metadata_props}
    assert meta == {"ipuof.recomputation": "4", "ipuof.available_memory_proportion": "0.16",
                    "ipuof.io_tiles": "64"}


def test_bad_mode_refused(daemon):
    m = Net()
    pm = poptorch.trainingModel(m, options(7), torch.optim.SGD(m.parameters(), lr=0.1))
    with pytest.raises(poptorch.Error, match="RecomputationType"):
        pm(*data(4))
