"""Module buffers forward() changes in place, carried from step to step by the daemon
(ai.graphcore::BufferUpdate) as torch carries them from call to call: inference and
training, device iterations, gradient accumulation, replicas without broadcasting; each
checked against PyTorch running the same program."""
import copy

import pytest
import torch
import torch.nn as nn

import poptorch


class Counter(nn.Module):
    """y = x + c, then c += x.sum(0) (c read before and after its change)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.tensor([1.0, -2.0]))

    def forward(self, x):
        y = x + self.c
        self.c += x.sum(0)
        return y, self.c * 1


@pytest.mark.parametrize("iterations", [1, 3])
def test_inference_carries_buffer(daemon, iterations):
    torch.manual_seed(0)
    ref, m = Counter(), Counter()
    opts = poptorch.Options().deviceIterations(iterations)
    pm = poptorch.inferenceModel(m, opts)
    try:
        for _ in range(3):
            x = torch.randn(iterations * 2, 2)
            y, c = pm(x)
            want = [ref(xi) for xi in x.split(2)]
            torch.testing.assert_close(y, torch.cat([w[0] for w in want]))
            torch.testing.assert_close(c, torch.stack([w[1] for w in want]).reshape(c.shape))
        torch.testing.assert_close(m.c, ref.c)     # the host's buffer, as torch left it
    finally:
        pm.destroy()


class NoInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("x", torch.tensor([1.0]))
        self.register_buffer("seen", torch.zeros(3))

    def forward(self):
        self.x += 1.0
        self.seen.copy_(self.x.expand(3))   # written, never read: only its update
        return self.x


def test_model_without_inputs(daemon):
    m = NoInput()
    pm = poptorch.inferenceModel(m)
    try:
        assert [float(pm()) for _ in range(4)] == [2.0, 3.0, 4.0, 5.0]
        assert torch.equal(m.seen, torch.full((3,), 5.0))
    finally:
        pm.destroy()


class Updating(nn.Module):
    """PopTorch's buffers_test model: a buffer counting a trained bias under no_grad."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.register_buffer("acc", torch.zeros(2))

    def forward(self, x, t):
        y = self.fc(x)
        with torch.no_grad():
            self.acc += self.fc.bias * 2
        return y, nn.functional.mse_loss(y, t)


@pytest.mark.parametrize("iterations,accumulation", [(1, 1), (2, 3)])
def test_training_carries_buffer(daemon, iterations, accumulation):
    torch.manual_seed(1)
    m = Updating()
    ref = copy.deepcopy(m)
    x = torch.randn(iterations * accumulation * 2, 3)
    t = torch.randn(iterations * accumulation * 2, 2)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(2):
        for xs, ts in zip(x.split(2 * accumulation), t.split(2 * accumulation)):
            opt.zero_grad()
            for xa, ta in zip(xs.split(2), ts.split(2)):
                (ref(xa, ta)[1] / accumulation).backward()
            opt.step()
    opts = poptorch.Options().deviceIterations(iterations)
    opts.Training.gradientAccumulation(accumulation)
    pm = poptorch.trainingModel(m, opts, torch.optim.SGD(m.parameters(), lr=0.1))
    try:
        for _ in range(2):
            pm(x, t)
        torch.testing.assert_close(m.acc, ref.acc, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(m.fc.bias, ref.fc.bias, rtol=1e-5, atol=1e-6)
    finally:
        pm.destroy()


class PerReplica(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.zeros(1, 2))

    def forward(self, x):
        self.b.copy_(self.b + x)
        return poptorch.identity_loss(self.b, reduction="none")


def test_replicas_without_broadcast(daemon):
    opts = poptorch.Options().replicationFactor(2).broadcastBuffers(False)
    pm = poptorch.inferenceModel(PerReplica(), opts)
    x = torch.tensor([[9.0], [2.0]])
    try:
        for _ in range(5):
            y = pm(x)
        assert torch.equal(y, torch.tensor([[45.0, 45.0], [10.0, 10.0]]))
    finally:
        pm.destroy()


def test_replicas_with_broadcast_refused(daemon):
    pm = poptorch.inferenceModel(PerReplica(), poptorch.Options().replicationFactor(2))
    with pytest.raises(poptorch.Error, match=r"broadcastBuffers\(False\)"):
        pm(torch.tensor([[9.0], [2.0]]))


def test_compiles_are_not_shared(daemon):
    """A model of the same graph compiled after another was freed starts from its own
    buffers: the daemon's executable cache does not serve the used executable."""
    a = poptorch.inferenceModel(NoInput())
    assert float(a()) == 2.0 and float(a()) == 3.0
    a.destroy()
    b = poptorch.inferenceModel(NoInput())
    try:
        assert float(b()) == 2.0
    finally:
        b.destroy()
