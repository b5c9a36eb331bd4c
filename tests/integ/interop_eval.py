"""PyTorch's side of test_interop_eval.sh: training exports with BatchNormalization and Dropout.

Usage:
  /usr/bin/python3 tests/integ/interop_eval.py export DIR OPSET DROPOUT [DIR OPSET DROPOUT]...
  /usr/bin/python3 tests/integ/interop_eval.py check DIR [DIR]...

`export` builds a small CNN (Conv 1->4 3x3, BatchNorm2d, ReLU, Flatten, Dropout(p=0.5)
when DROPOUT is 1, Linear(144, 10)) with a CrossEntropyLoss, exports it for training
(torch.onnx.TrainingMode.TRAINING, opset OPSET: 14 carries training_mode=1 on
BatchNormalization, 13 carries its running statistics as extra outputs) and writes
DIR/model.onnx, DIR/input_image.pb (float [4, 1, 8, 8]) and DIR/input_labels.pb (int64 [4]).

`check` reads what build/tests/integ/drv_interop_eval wrote into DIR after one SGD step
(lr 0.1) on ipuofd and an inference model made from it, and compares with PyTorch:
  - the inference model's logits with PyTorch's eval() of the module holding the daemon's
    weights after the step (running statistics included): BatchNorm uses the running
    statistics, Dropout is the identity;
  - without Dropout (whose masks differ from PyTorch's), the step itself: the loss and every
    weight after PyTorch's own SGD step in train() mode (running statistics included).
Tolerance |got - want| <= 1e-4 |want| + 1e-5. Prints "ok - ..." / "not ok - ..." lines and
"N passed, M failed"; exits 1 when anything failed.
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

RTOL, ATOL = 1e-4, 1e-5


class Net(torch.nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.drop = torch.nn.Dropout(0.5) if dropout else torch.nn.Identity()
        self.fc = torch.nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(self.drop(x.flatten(1)))


class WithLoss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, image, labels):
        out = self.model(image)
        return out, self.loss(out, labels)


def write(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def read(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def export(out, opset, dropout):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = WithLoss(Net(dropout))
    # Running statistics away from their (0, 1) start, so that using them is visible.
    with torch.no_grad():
        model.model.bn.running_mean.uniform_(-0.5, 0.5)
        model.model.bn.running_var.uniform_(0.5, 2.0)
    image = torch.randn(4, 1, 8, 8) * 2 + 1
    labels = torch.tensor([1, 2, 3, 4])
    model.train()
    torch.onnx.export(model, (image, labels), os.path.join(out, "model.onnx"),
                      opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["image", "labels"],
                      output_names=["logits", "loss"])
    write(os.path.join(out, "input_image.pb"), image.numpy(), "image")
    write(os.path.join(out, "input_labels.pb"), labels.numpy(), "labels")
    print("exported opset %d, dropout %d" % (opset, dropout))


class Checker:
    def __init__(self):
        self.passed = self.failed = 0

    def close(self, what, got, want):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        ok = got.shape == want.shape and bool(np.all(np.abs(got - want) <= ATOL + RTOL * np.abs(want)))
        diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
        self.report(ok, "%s (max |diff| %.3g)" % (what, diff))

    def report(self, ok, text):
        print("%s - %s" % ("ok" if ok else "not ok", text))
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def load_state(model, dir_, prefix):
    """The initializers of DIR/model.onnx (or the daemon's w_K.pb files) into model."""
    state = {}
    if prefix == "onnx":
        for init in onnx.load(os.path.join(dir_, "model.onnx")).graph.initializer:
            state[init.name] = numpy_helper.to_array(init)
    else:
        k = 0
        while os.path.exists(os.path.join(dir_, "w_%d.pb" % k)):
            name, value = read(os.path.join(dir_, "w_%d.pb" % k))
            state[name] = value
            k += 1
    own = model.state_dict()
    with torch.no_grad():
        for name, value in state.items():
            own[name].copy_(torch.from_numpy(np.array(value)))
    return state


def check(dir_):
    c = Checker()
    graph = onnx.load(os.path.join(dir_, "model.onnx")).graph
    dropout = any(n.op_type == "Dropout" for n in graph.node)
    _, image = read(os.path.join(dir_, "input_image.pb"))
    _, labels = read(os.path.join(dir_, "input_labels.pb"))
    image, labels = torch.from_numpy(image), torch.from_numpy(labels)

    # The inference model against eval() on the daemon's trained weights.
    model = WithLoss(Net(dropout))
    daemon = load_state(model, dir_, "daemon")
    model.eval()
    with torch.no_grad():
        want, _ = model(image, labels)
        model.train()
        train_fwd, _ = model(image, labels)
    _, got = read(os.path.join(dir_, "eval_logits.pb"))
    c.close("the inference model's logits match PyTorch's eval() on the trained weights", got,
            want.numpy())
    if not dropout:
        c.report(float(np.max(np.abs(got - train_fwd.numpy()))) > 1e-3,
                 "and differ from the train()-mode forward (batch statistics)")

    if dropout:
        print("%d passed, %d failed" % (c.passed, c.failed))
        return c.failed == 0
    # The step against PyTorch's own step from the exported weights.
    ref = WithLoss(Net(False))
    load_state(ref, dir_, "onnx")
    ref.train()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt.zero_grad()
    _, loss = ref(image, labels)
    loss.backward()
    opt.step()
    _, got_loss = read(os.path.join(dir_, "step_loss.pb"))
    c.close("the step's loss matches PyTorch's", got_loss.reshape(()), loss.detach().numpy())
    own = ref.state_dict()
    for name, value in daemon.items():
        c.close("weight '%s' after the step matches PyTorch's" % name, value, own[name].numpy())
    print("%d passed, %d failed" % (c.passed, c.failed))
    return c.failed == 0


def main():
    args = sys.argv[2:]
    if sys.argv[1] == "export":
        for i in range(0, len(args) - 2, 3):
            export(args[i], int(args[i + 1]), args[i + 2] == "1")
        return 0
    ok = True
    for d in args:
        print("# %s" % d)
        ok = check(d) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
