"""The models and datasets of the reference listings (PopTorch's documentation, 003 and
002), and a plain-PyTorch reference of what one call of a training model computes."""
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


class ConvLayer(nn.Module):
    """The pipelining tutorial's (002) convolution block."""

    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.conv(x)
        x = self.pool(x)
        x = self.relu(x)
        return x


class Network(nn.Module):
    """The pipelining tutorial's (002) network, blocks B1..B4."""

    def __init__(self):
        super().__init__()
        self.layer1 = ConvLayer(1, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        self.layer3 = nn.Linear(320, 256)
        self.layer3_act = nn.ReLU()
        self.layer4 = nn.Linear(256, 10)

    def forward(self, x):
        with poptorch.Block("B1"):
            x = self.layer1(x)
        with poptorch.Block("B2"):
            x = self.layer2(x)
        with poptorch.Block("B3"):
            x = x.view(-1, 320)
            x = self.layer3_act(self.layer3(x))
        with poptorch.Block("B4"):
            x = self.layer4(x)
        return x


class TrainingModelWithLoss(nn.Module):
    """The tutorial's (002) model with its loss in block B4."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()

    def forward(self, args, labels=None):
        output = self.model(args)
        if labels is None:
            return output
        with poptorch.Block("B4"):
            loss = self.loss(output, labels)
        return output, loss


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
