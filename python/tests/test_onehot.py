"""torch.nn.functional.one_hot (ONNX OneHot, sim/ops/op_onehot.c) through a real daemon: the
one-hot tensor itself, a label-smoothed cross entropy built from it (as BERT's masked-LM
loss is), inference and 3 SGD training steps compared with the same model in plain
PyTorch; and one_hot without num_classes, whose depth is max(labels) + 1 computed at run
time in PyTorch but which PyTorch's exporter writes as depth -1, refused at compile time with
a sentence asking for num_classes."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import poptorch

RTOL, ATOL = 1e-5, 1e-6
CLASSES = 7


def close(a, b):
    print(f"max abs difference {(a.double() - b.double()).abs().max().item():.3g}")
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=RTOL, atol=ATOL)


class Smoothed(nn.Module):
    """A Linear classifier whose loss is cross entropy against a label-smoothed one-hot
    target; returns the logits, the one-hot labels and (with labels) the loss."""

    def __init__(self, num_classes=CLASSES, smoothing=0.1):
        super().__init__()
        self.lin = nn.Linear(5, CLASSES)
        self.num_classes = num_classes
        self.smoothing = smoothing

    def forward(self, x, labels):
        logits = self.lin(x)
        hot = F.one_hot(labels, self.num_classes)
        target = hot.float() * (1.0 - self.smoothing) + self.smoothing / CLASSES
        loss = -(target * F.log_softmax(logits, dim=-1)).sum(-1).mean()
        return logits, hot, loss


def test_onehot_inference(daemon):
    torch.manual_seed(0)
    model = Smoothed()
    x = torch.randn(6, 5)
    labels = torch.LongTensor([0, 6, 3, 3, 1, 5])
    pm = poptorch.inferenceModel(copy.deepcopy(model))
    logits, hot, loss = pm(x, labels)
    ref_logits, ref_hot, ref_loss = model(x, labels)
    assert torch.equal(hot.long(), ref_hot)
    assert close(logits, ref_logits.detach())
    assert close(loss, ref_loss.detach())
    pm.destroy()


class Trained(nn.Module):
    """Smoothed with the loss as PopTorch's training output."""

    def __init__(self):
        super().__init__()
        self.inner = Smoothed()

    def forward(self, x, labels):
        logits, _, loss = self.inner(x, labels)
        return logits, poptorch.identity_loss(loss, reduction="none")


def test_onehot_training(daemon):
    torch.manual_seed(1)
    model = Trained()
    ref = copy.deepcopy(model)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.5)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    losses = []
    for step in range(3):
        x = torch.randn(8, 5)
        labels = torch.randint(0, CLASSES, (8,))
        opt_ref.zero_grad()
        y_ref, loss_ref = ref(x, labels)
        loss_ref.backward()
        opt_ref.step()
        y, loss = pm(x, labels)
        assert close(y, y_ref.detach())
        assert close(loss, loss_ref.detach())
        losses.append(float(loss))
    pm.copyWeightsToHost()
    assert close(model.inner.lin.weight.detach(), ref.inner.lin.weight.detach())
    assert close(model.inner.lin.bias.detach(), ref.inner.lin.bias.detach())
    pm.destroy()


def test_onehot_depth_from_data_refused(daemon):
    """num_classes=-1: PyTorch computes the class count from the labels, its exporter
    writes depth -1 (which ONNX's OneHot cannot run); the compile error says so."""
    model = Smoothed(num_classes=-1)
    pm = poptorch.inferenceModel(model)
    with pytest.raises(Exception) as info:
        pm(torch.randn(3, 5), torch.LongTensor([0, 6, 2]))
    print(info.value)
    assert "depth is -1" in str(info.value) and "give num_classes" in str(info.value)
    pm.destroy()
