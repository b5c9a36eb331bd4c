"""nn.EmbeddingBag and F.embedding_bag against PyTorch: the package's symbolic
(ipuof/export/bag.py) replaces the exporter's Loop, whose trip count is computed at run
time and which the daemon refused. Every mode (sum, mean, max), per_sample_weights,
include_last_offset, padding_idx, offsets given as data (a graph input, with an empty bag),
inference and 3 SGD steps of training compared with the same model in plain PyTorch."""
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


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_inference(daemon, mode):
    torch.manual_seed(0)
    model = nn.EmbeddingBag(10, 3, mode=mode)
    x = torch.LongTensor([[1, 2, 4, 5], [4, 3, 2, 9]])
    pm = poptorch.inferenceModel(copy.deepcopy(model))
    assert close(pm(x), model(x).detach())
    pm.destroy()


class Bag(nn.Module):
    """F.embedding_bag on 1-D indices with offsets (and weights) given as inputs, then a
    Linear; the loss is an MSE against a target when one is given."""

    def __init__(self, mode, include_last_offset=False, padding_idx=None):
        super().__init__()
        self.bag = nn.EmbeddingBag(12, 4, mode=mode, include_last_offset=include_last_offset,
                                   padding_idx=padding_idx)
        self.lin = nn.Linear(4, 2)

    def forward(self, idx, offsets, psw=None, target=None):
        y = self.lin(self.bag(idx, offsets, per_sample_weights=psw))
        if target is None:
            return y
        return y, F.mse_loss(y, target)


CASES = [
    # mode, include_last_offset, padding_idx, offsets (an empty bag in the middle), psw
    ("sum", False, None, [0, 2, 2, 5], False),
    ("mean", False, None, [0, 3, 3, 4], False),
    ("max", False, None, [0, 1, 1, 6], False),
    ("sum", False, None, [0, 3, 4, 4], True),
    ("mean", True, None, [0, 2, 5, 5, 7], False),
    ("max", True, None, [0, 4, 4, 7, 7], False),
    ("mean", False, 3, [0, 2, 4, 6], False),
    ("max", False, 3, [0, 2, 4, 6], False),
]


@pytest.mark.parametrize("mode,last,pad,offsets,weighted", CASES)
def test_embedding_bag_training(daemon, mode, last, pad, offsets, weighted):
    torch.manual_seed(3)
    model = Bag(mode, last, pad)
    ref = copy.deepcopy(model)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    offs = torch.LongTensor(offsets)
    n_bags = len(offsets) - (1 if last else 0)
    for step in range(3):
        # index 3 (the padding index where set) appears in some bags; each step other data
        idx = torch.LongTensor([3, 1, 5, 3, 7, 11, 0, 3])[torch.randperm(8)][:7]
        target = torch.randn(n_bags, 2)
        psw = torch.rand(7) + 0.5 if weighted else None
        opt_ref.zero_grad()
        y_ref, loss_ref = ref(idx, offs, psw, target)
        loss_ref.backward()
        opt_ref.step()
        y, loss = pm(idx, offs, psw, target)
        assert close(y, y_ref.detach())
        assert close(loss, loss_ref.detach())
    pm.copyWeightsToHost()
    assert close(model.bag.weight.detach(), ref.bag.weight.detach())
    assert close(model.lin.weight.detach(), ref.lin.weight.detach())
    pm.destroy()


def test_embedding_bag_offsets_as_data(daemon):
    """The same compiled model with other offsets: the bags follow the data."""
    torch.manual_seed(4)
    model = Bag("sum")
    pm = poptorch.inferenceModel(copy.deepcopy(model))
    idx = torch.LongTensor([1, 2, 3, 4, 5, 6])
    for offsets in ([0, 1, 2], [0, 0, 6], [0, 3, 5]):
        offs = torch.LongTensor(offsets)
        assert close(pm(idx, offs), model(idx, offs).detach())
    pm.destroy()


def test_embedding_bag_scale_grad_by_freq_training_refused(daemon):
    """Training with scale_grad_by_freq would need the gradient scaled by each index's
    count: refused with what would work (inference takes it: the forward is the same)."""
    torch.manual_seed(5)
    model = Bag("sum")
    model.bag.scale_grad_by_freq = True
    idx, offs = torch.LongTensor([1, 2, 2, 4]), torch.LongTensor([0, 2, 3])
    pm = poptorch.inferenceModel(copy.deepcopy(model))
    assert close(pm(idx, offs), model(idx, offs).detach())
    pm.destroy()
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(poptorch.Error, match="scale_grad_by_freq=True cannot be trained"):
        pm(idx, offs, None, torch.randn(3, 2))
