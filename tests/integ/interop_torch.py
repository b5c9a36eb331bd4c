"""PyTorch's side of test_interop_torch.sh: one AdamW step of the tutorial's MNIST network.

Usage: /usr/bin/python3 tests/integ/interop_torch.py OUTDIR

Defines the network of PopTorch's pipelining tutorial (two ConvLayers, Linear(320, 256),
ReLU, Linear(256, 10)) with its loss (TrainingModelWithLoss: CrossEntropyLoss), exports the
forward with the loss as an output (opset 13; the parameters become initializers named as
PyTorch names them), then trains ONE step on one batch with AdamW(lr=1e-3) and writes, as
ONNX TensorProto files in OUTDIR:

  model.onnx                 the exported model, initial weights included
  input_image.pb             the batch: image float [8, 1, 28, 28] (name "image")
  input_labels.pb            labels int64 [8] (name "labels")
  loss.pb                    the loss of that step (before the update), float []
  initial_K.pb, weight_K.pb  for each initializer K of model.onnx, in graph order: its
                             value before and after the step, named as the initializer
  grad_K.pb                  its gradient in that step (where it is within a few eps of 0,
                             Adam's first update g / (|g| + eps) depends on rounding, so the
                             C side allows those elements a difference of up to lr)

The C side (build/tests/integ/drv_interop_step OUTDIR) does the same step on ipuofd and
compares.
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = torch.nn.MaxPool2d(kernel_size=pool_size)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class Network(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = ConvLayer(1, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        self.layer3 = torch.nn.Linear(320, 256)
        self.layer3_act = torch.nn.ReLU()
        self.layer4 = torch.nn.Linear(256, 10)

    def forward(self, x):
        x = self.layer1(x)
        x = self.layer2(x)
        x = x.view(-1, 320)
        x = self.layer3_act(self.layer3(x))
        return self.layer4(x)


class TrainingModelWithLoss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, args, labels):
        output = self.model(args)
        return output, self.loss(output, labels)


def write(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = TrainingModelWithLoss(Network())
    image = torch.randn(8, 1, 28, 28)
    labels = torch.randint(0, 10, (8,), dtype=torch.int64)

    path = os.path.join(out, "model.onnx")
    torch.onnx.export(model, (image, labels), path, input_names=["image", "labels"],
                      output_names=["logits", "loss"], opset_version=13,
                      do_constant_folding=False)
    inits = [t.name for t in onnx.load(path).graph.initializer]
    params = dict(model.named_parameters())
    missing = [n for n in inits if n not in params]
    if missing or len(inits) != len(params):
        sys.exit("initializers %s do not match the parameters %s" % (inits, list(params)))

    write(os.path.join(out, "input_image.pb"), image.numpy(), "image")
    write(os.path.join(out, "input_labels.pb"), labels.numpy(), "labels")
    for k, name in enumerate(inits):
        write(os.path.join(out, "initial_%d.pb" % k), params[name].detach().numpy(), name)

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.zero_grad()
    _, loss = model(image, labels)
    loss.backward()
    opt.step()
    write(os.path.join(out, "loss.pb"), loss.detach().numpy().astype(np.float32), "loss")
    for k, name in enumerate(inits):
        write(os.path.join(out, "weight_%d.pb" % k), params[name].detach().numpy(), name)
        write(os.path.join(out, "grad_%d.pb" % k), params[name].grad.numpy(), name)
    print("exported %d weights, loss %.6f" % (len(inits), loss.item()))


if __name__ == "__main__":
    main()
