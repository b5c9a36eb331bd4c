"""The models and datasets of the reference listings (PopTorch's documentation, 003 and
002), and a plain-PyTorch reference of what one call of a training model computes."""
import os
import sys
from functools import reduce
from operator import mul

import torch
import torch.nn as nn

import poptorch


class ExampleModelWithLoss(nn.Module):
    """Listing 5.2's model."""

    def __init__(self, data_shape, num_classes):
        super().__init__()
        self.fc = nn.Linear(reduce(mul, data_shape), num_classes)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, target=None):
        reshaped = x.reshape([x.shape[0], -1])
        fc = self.fc(reshaped)
        if target is not None:
            return fc, self.loss(fc, target)
        return fc


class ExampleDataset(torch.utils.data.Dataset):
    """Listing 5.2's dataset."""

    def __init__(self, shape, length):
        super().__init__()
        self._shape = shape
        self._length = length
        self._all_data = []
        self._all_labels = []
        torch.manual_seed(0)
        for _ in range(length):
            label = 1 if torch.rand(()) > 0.5 else 0
            data = torch.rand(self._shape) + label
            data[0] = -data[0]
            self._all_data.append(data)
            self._all_labels.append(label)

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        return self._all_data[index], self._all_labels[index]


# The pipelining tutorial's (002) network with its blocks B1..B4, and the model with its loss
# in B4: the example program's own classes, so the tests train exactly what it trains.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from mnist_tutorial import ConvLayer, Network, TrainingModelWithLoss  # noqa: E402,F401


def reference_call(model, optimizer, inputs, labels, b, d, a, r, sum_reduction=False):
    """What one call of a training model does, in plain PyTorch on model (changed in
    place): the call's samples are laid out [D][A][R][B]; each device iteration averages
    (or sums) the gradients of its A x R micro-batches and takes one optimizer step.
    Returns the per-micro-batch outputs as [(output, loss)] in [D][A][R] order, each
    computed with the weights of its iteration."""
    outs = []
    per = a * r * b
    for it in range(d):
        optimizer.zero_grad()
        for k in range(a * r):
            lo = it * per + k * b
            out, loss = model(inputs[lo:lo + b], labels[lo:lo + b])
            (loss if sum_reduction else loss / (a * r)).backward()
            outs.append((out.detach().clone(), loss.detach().clone()))
        optimizer.step()
    return outs
