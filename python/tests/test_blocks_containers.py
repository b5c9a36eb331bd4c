"""Blocks wherever users put them: BeginBlock on a layer held in an nn.ModuleList,
nn.Sequential or nn.ModuleDict, replaced by index or by name (as Graphcore's BERT and ViT
write `self.encoder.layer[i] = poptorch.BeginBlock(layer, f"Encoder{i}", ipu_id=...)`),
Block and BlockFunction inside such layers, and PopTorch's stage numbering
(AutoStage.SameAsIpu: stage = IPU; AutoIncrement: a new stage per new block, so a later
block back on IPU 0 is a stage of its own). Each model compiles on the daemon (which
refuses a prefix that matches no node), runs equal to torch, and puts its layers' nodes
on the IPUs asked for."""
import copy
import warnings

import pytest
import torch
from torch import nn

import poptorch


_made = []


@pytest.fixture(autouse=True)
def _quiet():
    """Warnings off; every model a test made is destroyed after it, passed or failed (so
    a failure leaves no IPU attached for the next test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    while _made:
        _made.pop().destroy()


def _infer(model, opts):
    _made.append(poptorch.inferenceModel(model, opts))
    return _made[-1]


def _blocks(pm):
    """The placement the model was compiled with: [(node prefix, stage, IPU)]."""
    return [tuple(b) for b in pm._placement_opts["blocks"]]


def _ipu_of(pm, prefix):
    """The IPU of the placement entries whose prefix starts with `prefix` (one IPU)."""
    ipus = {ipu for p, _, ipu in _blocks(pm) if p.startswith(prefix)}
    assert len(ipus) == 1, (prefix, _blocks(pm))
    return ipus.pop()


class ListNet(nn.Module):
    """Four layers in an nn.ModuleList inside a child module, each made a BeginBlock by
    index as Graphcore's BERT does, on IPUs 0, 1, 1, 2 by default."""

    def __init__(self, ipus=(0, 1, 1, 2)):
        super().__init__()
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList([nn.Linear(6, 6) for _ in ipus])
        for i, ipu in enumerate(ipus):
            self.encoder.layer[i] = poptorch.BeginBlock(self.encoder.layer[i],
                                                        f"Encoder{i}", ipu_id=ipu)

    def forward(self, x):
        for layer in self.encoder.layer:
            x = torch.relu(layer(x))
        return x


def test_modulelist_layers_replaced_by_index_are_placed(daemon):
    """The ModuleList's layers land on their IPUs (main: "block 'Encoder0' contains no
    module"); 3 stages (SameAsIpu), the inference result equals torch's."""
    model = ListNet()
    x = torch.randn(8, 6)
    pm = _infer(copy.deepcopy(model), poptorch.Options().deviceIterations(4).autoRoundNumIPUs(True))
    out = pm(x)
    assert torch.allclose(out, model(x), atol=1e-5)
    # encoder itself is never called, so its scope is not in the names (as torch's)
    assert [_ipu_of(pm, f"/layer.{i}/") for i in range(4)] == [0, 1, 1, 2]
    assert sorted({s for _, s, _ in _blocks(pm)}) == [0, 1, 2]


class SeqNet(nn.Module):
    """An nn.Sequential whose second and fourth entries are replaced by setattr (by name)
    and by index with BeginBlocks, and an nn.ModuleDict entry replaced by key."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 5), nn.Tanh(), nn.Linear(5, 5), nn.ReLU(),
                                  nn.Linear(5, 5))
        self.heads = nn.ModuleDict({"a": nn.Linear(5, 3), "b": nn.Linear(5, 3)})
        self.body[0] = poptorch.BeginBlock(self.body[0], "B0", ipu_id=0)
        setattr(self.body, "2", poptorch.BeginBlock(self.body[2], "B1", ipu_id=1))
        self.heads["a"] = poptorch.BeginBlock(self.heads["a"], "Head", ipu_id=2)

    def forward(self, x):
        y = self.body(x)
        return self.heads["a"](y) + self.heads["b"](y)


def test_sequential_and_moduledict_entries_are_placed(daemon):
    """Sequential entries replaced by index and by setattr, and a ModuleDict entry replaced
    by key, start their blocks; the layers after each BeginBlock follow it; the training
    model's updated weights equal torch's SGD step over the 5 micro-batches."""
    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = SeqNet()

        def forward(self, x, t):
            out = self.net(x)
            return out, poptorch.identity_loss(((out - t) ** 2).mean(), reduction="mean")

    torch.manual_seed(0)
    model = Loss()
    ref = copy.deepcopy(model)
    x, t = torch.randn(5, 5), torch.randn(5, 3)
    opts = poptorch.Options().autoRoundNumIPUs(True)
    opts.Training.gradientAccumulation(5)
    pm = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    _made.append(pm)
    pm(x, t)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    rloss = sum(ref(x[i:i + 1], t[i:i + 1])[1] for i in range(5)) / 5
    rloss.backward()
    ropt.step()
    for (n, p), (_, r) in zip(model.named_parameters(), ref.named_parameters()):
        assert torch.allclose(p, r, atol=1e-5), n
    assert _ipu_of(pm, "/net/body/body.0/") == 0
    assert _ipu_of(pm, "/net/body/body.1/") == 0   # the Tanh after B0's layer
    assert _ipu_of(pm, "/net/body/body.2/") == 1
    assert _ipu_of(pm, "/net/body/body.4/") == 1
    assert _ipu_of(pm, "/net/a/") == 2
    assert _ipu_of(pm, "/net/b/") == 2             # heads["b"] runs after Head's BeginBlock


class FnNet(nn.Module):
    """Layers in a ModuleList that open Block contexts and call a BlockFunction inside
    their own forward, and a BeginBlock layer after them."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Inner(i) for i in range(2)] + [nn.Linear(4, 4)])
        self.layers[2] = poptorch.BeginBlock(self.layers[2], "Tail", ipu_id=1)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Inner(nn.Module):
    def __init__(self, i):
        super().__init__()
        self.i = i
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        with poptorch.Block(f"L{self.i}", ipu_id=self.i):
            x = self.lin(x)

        @poptorch.BlockFunction(f"F{self.i}", ipu_id=self.i)
        def act(y):
            return torch.sigmoid(y) * 2

        return act(x)


def test_block_contexts_inside_modulelist_layers(daemon):
    """Block and BlockFunction opened inside the forward of ModuleList layers place their
    ops (two IPUs), and the result equals torch's."""
    model = FnNet()
    x = torch.randn(4, 4)
    pm = _infer(copy.deepcopy(model), poptorch.Options().deviceIterations(2))
    assert torch.allclose(pm(x), model(x), atol=1e-5)
    ipus = {ipu for _, _, ipu in _blocks(pm)}
    assert ipus == {0, 1}
    assert all(p.startswith("/layers.") for p, _, _ in _blocks(pm)), _blocks(pm)
    assert _ipu_of(pm, "/layers.2/") == 1


class _Three(nn.Module):
    """Blocks "0" on IPU 0, "1" on IPU 1, "2" back on IPU 0 (PopTorch's AutoStage
    example), as BeginBlocks of the layers of a ModuleList."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])
        for i, ipu in enumerate((0, 1, 0)):
            self.layers[i] = poptorch.BeginBlock(self.layers[i], str(i), ipu_id=ipu)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _three_blocks():
    return _Three()


def test_autoincrement_gives_a_later_block_on_ipu0_its_own_stage(daemon):
    """AutoIncrement numbers the stages 1, 2, 3 in the order the blocks are made (as
    PopTorch's _DefaultStageManager: stage 0 is its default block, the ops before the
    first block), the third back on IPU 0; the 3-stage pipeline runs and equals torch."""
    model = _three_blocks()
    x = torch.randn(6, 3)
    opts = poptorch.Options().deviceIterations(3)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    pm = _infer(copy.deepcopy(model), opts)
    assert torch.allclose(pm(x), model(x), atol=1e-5)
    stages = {p: (s, ipu) for p, s, ipu in _blocks(pm)}
    assert [stages[f"/layers.{i}/"] for i in range(3)] == [(1, 0), (2, 1), (3, 0)]


def test_sameasipu_puts_a_later_block_on_ipu0_in_stage0(daemon):
    """SameAsIpu (the default) gives the stage of the IPU: blocks "0" and "2" are both
    stage 0, a block of stage 0 consuming stage 1's output, which a pipeline cannot run:
    refused with a sentence naming the blocks and the way out (AutoIncrement)."""
    model = _three_blocks()
    opts = poptorch.Options().deviceIterations(3)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.SameAsIpu))
    pm = _infer(model, opts)
    with pytest.raises(poptorch.Error, match=r"reads '/layers.1/Gemm_output_0' from node "
                       r".* in the later stage 1: stages must have ascending values"):
        pm(torch.randn(6, 3))
    stages = {p: (s, ipu) for p, s, ipu in _blocks(pm)}
    assert [stages[f"/layers.{i}/"] for i in range(3)] == [(0, 0), (1, 1), (0, 0)]


class Nested(nn.Module):
    """BERT's layout: embeddings a BeginBlock on IPU 0, then an encoder module (called,
    so its scope is "/encoder/") whose ModuleList layers are BeginBlocks on IPU 1."""

    def __init__(self):
        super().__init__()
        self.embeddings = poptorch.BeginBlock(nn.Linear(4, 4), "Embedding", ipu_id=0)
        self.encoder = ListEncoder()

    def forward(self, x):
        return self.encoder(self.embeddings(x))


class ListEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        for i in range(2):
            self.layer[i] = poptorch.BeginBlock(self.layer[i], f"Encoder{i}", ipu_id=1)

    def forward(self, x):
        for layer in self.layer:
            x = torch.tanh(layer(x))
        return x


def test_beginblock_layers_inside_a_container_called_in_an_earlier_block(daemon):
    """The encoder is entered while the embeddings' block is current, so "/encoder/" is
    that block's; its layers still start their own blocks on IPU 1 (the daemon takes the
    longest prefix); AutoIncrement gives 3 stages and the result equals torch's."""
    model = Nested()
    x = torch.randn(3, 4)
    opts = poptorch.Options().deviceIterations(3)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    pm = _infer(copy.deepcopy(model), opts)
    assert torch.allclose(pm(x), model(x), atol=1e-5)
    assert _ipu_of(pm, "/embeddings/") == 0
    assert _ipu_of(pm, "/encoder/layer.0/") == 1
    assert _ipu_of(pm, "/encoder/layer.1/") == 1
    assert sorted({s for _, s, _ in _blocks(pm)}) == [1, 2, 3]
