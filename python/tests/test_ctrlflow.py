"""Control flow against PyTorch: poptorch.for_loop and poptorch.cond in a model (inference,
and 3 SGD steps of training compared with the same model in plain PyTorch), and a
TorchScript module whose export holds ONNX Loop and If nodes (the daemon unrolls the Loop
and takes or selects the If's branch when it loads the model)."""
import os
import subprocess

import pytest
import torch
from torch import nn

import poptorch
from conftest import BUILD

RTOL, ATOL = 1e-5, 1e-6


def close(a, b):
    print(f"max abs difference {(a - b).abs().max().item():.3g}")
    return torch.allclose(a, b, rtol=RTOL, atol=ATOL)


class LoopCond(nn.Module):
    """3 steps of tanh(lin(h)) through for_loop, then cond on the sum's sign (the tensor
    condition of poptorch.cond), then an MSE loss when a target is given. With plain=True
    the same computation in eager PyTorch (a Python loop and if): the reference."""

    def __init__(self, plain=False):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.plain = plain

    def forward(self, x, target=None):
        if self.plain:
            h = x
            for _ in range(3):
                h = torch.tanh(self.lin(h))
            y = h * 2 if h.sum() > 0 else h - 1
        else:
            h = poptorch.for_loop(3, lambda t: torch.tanh(self.lin(t)), [x])[0]
            y = poptorch.cond(h.sum() > 0, lambda t: t * 2, [h], lambda t: t - 1, [h])[0]
        if target is None:
            return y
        return y, nn.functional.mse_loss(y, target)


def test_for_loop_and_cond_inference(daemon):
    torch.manual_seed(0)
    model = LoopCond()
    ref = LoopCond(plain=True)
    ref.load_state_dict(model.state_dict())
    pm = poptorch.inferenceModel(model)
    taken = set()
    for k in range(6):
        x = torch.randn(2, 4) + (2.0 if k % 2 else -2.0)
        want = ref(x)
        taken.add(bool(torch.tanh(ref.lin(x)).sum() > 0))
        assert close(pm(x), want)
    assert taken == {True, False}, "both branches must be exercised"
    pm.destroy()


def test_for_loop_and_cond_training(daemon):
    torch.manual_seed(1)
    model = LoopCond()
    ref = LoopCond(plain=True)
    ref.load_state_dict(model.state_dict())
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    for step in range(3):
        x, t = torch.randn(2, 4) + (1.0 if step % 2 else -1.0), torch.randn(2, 4)
        opt_ref.zero_grad()
        y_ref, loss_ref = ref(x, t)
        loss_ref.backward()
        opt_ref.step()
        y, loss = pm(x, t)
        assert close(loss, loss_ref.detach())
    pm.copyWeightsToHost()
    assert close(model.lin.weight.detach(), ref.lin.weight.detach())
    assert close(model.lin.bias.detach(), ref.lin.bias.detach())
    pm.destroy()


def test_cond_checks_its_arguments():
    x = torch.ones(2)
    assert poptorch.cond(True, lambda t: t + 1, [x], lambda t: t - 1, [x])[0].tolist() == [2, 2]
    assert poptorch.cond(False, lambda t: t + 1, [x], lambda t: t - 1, [x])[0].tolist() == [0, 0]
    with pytest.raises(ValueError, match="must hold one value"):
        poptorch.cond(torch.tensor([True, False]), lambda: x, [], lambda: x, [])
    with pytest.raises(poptorch.Error, match="equal shapes and dtypes"):
        poptorch.cond(torch.tensor(True), lambda: x, [], lambda: torch.ones(3), [])
    with pytest.raises(poptorch.Error, match="as many"):
        poptorch.cond(torch.tensor(True), lambda: [x, x], [], lambda: x, [])
    with pytest.raises(ValueError, match="then_inputs to be a list"):
        poptorch.cond(torch.tensor(True), lambda t: t, x, lambda t: t, [x])


class Scripted(nn.Module):
    """TorchScript keeps the loop (over the input's rows) and the if: the export has an
    ONNX Loop, whose trip count the exporter makes a Constant, and an If on data."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        acc = torch.zeros_like(x)
        for _ in range(x.size(0)):
            acc = acc + torch.tanh(self.lin(acc + x))
        if bool(acc.sum() > 0):
            y = acc * 2
        else:
            y = acc - 1
        return y


def test_scripted_loop_and_if(daemon, tmp_path):
    """The exporter's own Loop and If, run by ipuof-run on the daemon."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    torch.manual_seed(2)
    model = Scripted()
    run = os.path.join(BUILD, "bin", "ipuof-run")
    for k in range(2):
        x = torch.randn(3, 4) + (2.0 if k else -2.0)
        path = tmp_path / f"m{k}.onnx"
        torch.onnx.export(torch.jit.script(model), (x,), str(path), opset_version=14,
                          input_names=["x"], output_names=["y"], do_constant_folding=False)
        ops = {n.op_type for n in onnx.load(str(path)).graph.node}
        assert {"Loop", "If"} <= ops, ops
        (tmp_path / "x.pb").write_bytes(numpy_helper.from_array(x.numpy(), "x")
                                        .SerializeToString())
        out = tmp_path / f"out{k}"
        subprocess.run([run, "--server", daemon.addr, "--model", str(path), "--input",
                        f"x={tmp_path / 'x.pb'}", "--output-dir", str(out), "--quiet"],
                       check=True)
        got = numpy_helper.to_array(onnx.load_tensor(str(out / "y.pb")))
        assert close(torch.from_numpy(got.copy()), model(x).detach())
