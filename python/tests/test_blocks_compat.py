"""Blocks and strategies as PopTorch programs write them: Block.start, BeginBlock of a
function, ParallelPhasedExecution, PopTorch's refusal of a pipeline too short to fill,
and its texts for a call whose inputs differ from the compiled ones."""
import copy
import warnings

import pytest
import torch

import poptorch


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class FourStarts(torch.nn.Module):
    """Four linear layers in four blocks made by Block.start (no context manager)."""

    def __init__(self):
        super().__init__()
        for i in range(4):
            setattr(self, f"lin{i}", torch.nn.Linear(2, 2))

    def forward(self, x):
        for i in range(4):
            poptorch.Block.start(f"B{i}", ipu_id=i)
            x = getattr(self, f"lin{i}")(x)
        return x


def test_block_start_places_the_layers(daemon):
    """Block.start makes blocks: a pipeline of 4 stages, which PopTorch refuses with 2
    device iterations and runs with 4 (equal to torch's result)."""
    model = FourStarts()
    opts = poptorch.Options().deviceIterations(2)
    pm = poptorch.inferenceModel(model, opts)
    with pytest.raises(poptorch.Error, match=r"poptorch\.Options\(\)\.deviceIterations must "
                       r"be greater than or equal to the number of pipeline stages \(4\)"):
        pm(torch.randn(2, 2))
    pm.destroy()
    x = torch.randn(4, 2)
    pm = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(4))
    assert torch.allclose(pm(x), model(x), atol=1e-6)
    pm.destroy()


def test_pipeline_shorter_than_its_stages_is_refused(daemon):
    """Training a pipeline of N stages needs gradientAccumulation >= 2N-1 (PopTorch's
    text); 7 for 4 stages runs."""
    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = FourStarts()

        def forward(self, x):
            out = self.net(x)
            with poptorch.Block("B3", ipu_id=3):
                return out, poptorch.identity_loss(out, reduction="mean")

    for acc, ok in ((5, False), (7, True)):
        opts = poptorch.Options()
        opts.Training.gradientAccumulation(acc)
        pm = poptorch.trainingModel(WithLoss(), opts)
        x = torch.zeros(acc, 2)
        if ok:
            pm(x)
        else:
            with pytest.raises(poptorch.Error, match=r"gradientAccumulation must be greater "
                               r"than or equal to the number of pipeline stages \(7\).*"
                               r"a model with 4 pipeline stages in PopTorch will have an "
                               r"additional 3 stages when training"):
                pm(x)
        pm.destroy()


def _inc(x):
    return x + 1.0


def test_begin_block_of_a_function(tmp_path):
    block = poptorch.BeginBlock(_inc, 1, 2)
    assert isinstance(block, torch.nn.Module)
    assert (block._user_id, block._ipu_id) == (1, 2)
    assert torch.equal(block(torch.zeros(2)), torch.ones(2))
    torch.save(block, tmp_path / "b.pt")
    with pytest.raises(ValueError, match="torch.nn.Module or a function"):
        poptorch.BeginBlock(3)


def test_parallel_phased_execution_trains_as_torch(daemon):
    """Two phases of two stages on IPUs (0, 2) then (1, 3), data crossing between the
    stages of a phase: one step trains the weights torch's SGD trains."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.ParameterList(torch.nn.Parameter(torch.rand(4, 4))
                                            for _ in range(4))

        def forward(self, x, target):
            a, b = torch.split(x, 4)
            with poptorch.Block("p0a"):
                a = torch.relu(self.w[0] @ a)
            with poptorch.Block("p0b"):
                b = torch.relu(self.w[1] @ b)
            with poptorch.Block("p1a"):
                a2 = torch.relu(self.w[2] @ b)
            with poptorch.Block("p1b"):
                b2 = torch.relu(self.w[3] @ a)
                res = a2 + b2
                return res, torch.nn.functional.l1_loss(res, target)

    torch.manual_seed(0)
    net = Net()
    ref = copy.deepcopy(net)
    strategy = poptorch.ParallelPhasedExecution(
        [poptorch.Stage("p0a"), poptorch.Stage("p0b")],
        [poptorch.Stage("p1a"), poptorch.Stage("p1b")])
    strategy.phase(0).ipus(0, 2)
    strategy.phase(1).ipus(1, 3)
    assert [s._ipu for s in strategy.stages] == [0, 2, 1, 3]
    opts = poptorch.Options().setExecutionStrategy(strategy)
    pm = poptorch.trainingModel(net, opts, poptorch.optim.SGD(net.parameters(), lr=0.1))
    x, t = torch.rand(8, 1), torch.rand(4, 1)
    _, loss = pm(x, t)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref_loss = ref(x, t)[1]
    ref_loss.backward()
    opt.step()
    assert torch.allclose(loss, ref_loss, atol=1e-6)
    pm.copyWeightsToHost()
    for p, q in zip(net.parameters(), ref.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    pm.destroy()
    with pytest.raises(ValueError, match="Phase contains 2 stages but you provided 1"):
        strategy.phase(0).ipus(0)


def test_call_mismatch_texts(daemon):
    class M(torch.nn.Module):
        def forward(self, a, b, *c, u=3, **w):
            r = a + b
            for x in c:
                r = r + x
            return r * u

    class Wrapper(M):
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    t = torch.ones(2)
    pm = poptorch.inferenceModel(M())
    pm(t, t, t, t, u=5)
    with pytest.raises(poptorch.Error, match="Number of positional arguments mismatch: "
                                             "expected 4 arguments but got 3"):
        pm(t, t, t, u=5)
    pm.destroy()
    with pytest.raises(poptorch.Error, match="Mandatory parameter b missing"):
        poptorch.inferenceModel(M())(t)
    pm = poptorch.inferenceModel(Wrapper())
    pm(t, t, u=5)
    with pytest.raises(poptorch.Error, match="Value mismatch for u: expected 5 but got 3"):
        pm(t, t, u=3)
    pm.destroy()


def test_input_requiring_grad_is_warned_about(daemon, capsys):
    """The device computes no gradient for a model's inputs: PopTorch's warning says the
    input is detached; the result is torch's."""
    model = torch.nn.Linear(1, 1)
    pm = poptorch.inferenceModel(model)
    x = torch.tensor([[2.0]], requires_grad=True)
    assert torch.allclose(pm(x), model(x).detach())
    assert "Input tensor has requires_grad=True set. This tensor will be detached because " \
           "backward pass via inputs is not supported." in capsys.readouterr().err
    pm.destroy()


class _AfterContext(torch.nn.Module):
    """An op after a `with Block` context and before any other block (PopTorch's
    test_missing_block), or, with restart, inside a second block."""

    def __init__(self, restart):
        super().__init__()
        self.restart = restart
        self.lin0 = torch.nn.Linear(5, 5)
        self.lin1 = torch.nn.Linear(5, 5)

    def forward(self, x):
        poptorch.Block.useAutoId()
        with poptorch.Block(ipu_id=0):
            x = self.lin0(x) * 4
        if self.restart:
            poptorch.Block.start(ipu_id=1)
        return self.lin1(x) * 4


def test_op_after_block_context_is_refused(daemon):
    """PopTorch ends the active block with the context: an op before the next block is
    "No active Block" (it was placed with its producer); shapes may still be read."""
    opts = poptorch.Options().deviceIterations(2)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    pm = poptorch.inferenceModel(_AfterContext(False), opts)
    with pytest.raises(poptorch.Error, match="No active Block, all the ops must belong to "
                       "a Block .'linear' runs after"):
        pm.compile(torch.randn(2, 5))
    model = _AfterContext(True)
    x = torch.randn(2, 5)
    want = model(x)
    pm = poptorch.inferenceModel(model, opts)
    torch.testing.assert_close(pm(x), want, rtol=1e-5, atol=1e-6)
    pm.destroy()
