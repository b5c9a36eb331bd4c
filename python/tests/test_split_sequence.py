"""torch.chunk and torch.split into pieces of unequal size, which PyTorch exports as ONNX
SplitToSequence + SequenceAt (the split sizes computed from the input's shape): the daemon
refused both ops; it now makes each SequenceAt a Slice when the model loads. Inference
and 3 SGD steps of training compared with the same model in plain PyTorch."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import poptorch

RTOL, ATOL = 1e-5, 1e-6


def close(a, b):
    print(f"max abs difference {(a - b).abs().max().item():.3g}")
    return a.shape == b.shape and torch.allclose(a, b, rtol=RTOL, atol=ATOL)


class Chunks(nn.Module):
    """Linear, then torch.chunk(h, chunks, dim); each piece scaled by its position + 1
    and returned (and a loss over all of them when a target is given)."""

    def __init__(self, width, chunks, dim):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.chunks, self.dim = chunks, dim

    def forward(self, x, target=None):
        h = self.lin(x)
        pieces = [p * (i + 1) for i, p in enumerate(torch.chunk(h, self.chunks, self.dim))]
        if target is None:
            return tuple(pieces)
        loss = sum(((p - t) ** 2).mean()
                   for p, t in zip(pieces, torch.chunk(target, self.chunks, self.dim)))
        return pieces[0], loss


# (input shape, chunks, dim): 13 into 6 gives 5 pieces of 3, 3, 3, 3, 1 (fewer pieces than
# asked: the exporter's SplitToSequence); 11 into 6 gives 6 pieces (its Split: a control)
CASES = [((13,), 6, 0), ((2, 13), 6, 1), ((5, 3), 4, 0), ((11,), 6, 0)]


@pytest.mark.parametrize("shape,chunks,dim", CASES)
def test_uneven_chunk_inference(daemon, shape, chunks, dim):
    torch.manual_seed(0)
    model = Chunks(shape[-1], chunks, dim)
    pm = poptorch.inferenceModel(copy.deepcopy(model))
    x = torch.randn(*shape)
    got, want = pm(x), model(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert close(g, w.detach())
    pm.destroy()


@pytest.mark.parametrize("shape,chunks,dim", CASES)
def test_uneven_chunk_training(daemon, shape, chunks, dim):
    torch.manual_seed(1)
    model = Chunks(shape[-1], chunks, dim)
    ref = copy.deepcopy(model)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(3):
        x, t = torch.randn(*shape), torch.randn(*shape)
        opt_ref.zero_grad()
        y_ref, loss_ref = ref(x, t)
        loss_ref.backward()
        opt_ref.step()
        y, loss = pm(x, t)
        assert close(y, y_ref.detach())
        assert close(loss, loss_ref.detach())
    pm.copyWeightsToHost()
    assert close(model.lin.weight.detach(), ref.lin.weight.detach())
    pm.destroy()
