"""poptorch's ops: honoured (ipu_print_tensor, serializedMatMul, for_loop, nop, NameScope;
set_available_memory and recomputationCheckpoint: their tensors as given outside a
capture, test_recompute.py for the rest), accepted with one warning (MultiConv) or
refused with a sentence (custom_op, CPU); cond in test_ctrlflow.py."""
import warnings

import pytest
import torch
import torch.nn as nn

import poptorch


def test_ipu_print_tensor_prints_the_device_value(daemon, capfd):
    class M(nn.Module):
        def forward(self, x):
            y = poptorch.ipu_print_tensor(x * 3, "tripled")
            return y + 1

    x = torch.tensor([[1.0, 2.0]])
    pm = poptorch.inferenceModel(M())
    torch.testing.assert_close(pm(x), x * 3 + 1)
    out, _ = capfd.readouterr()
    assert "tripled: tensor([[3., 6.]])" in out, out
    pm.destroy()


@pytest.mark.parametrize("mode", list(poptorch.MatMulSerializationMode))
def test_serialized_matmul(daemon, mode):
    class M(nn.Module):
        def forward(self, a, b):
            return poptorch.serializedMatMul(a, b, mode, 2)

    a, b = torch.rand(4, 6), torch.rand(6, 8)
    pm = poptorch.inferenceModel(M())
    torch.testing.assert_close(pm(a, b), a @ b, rtol=1e-5, atol=1e-6)
    pm.destroy()


def test_for_loop_is_the_loop(daemon):
    class M(nn.Module):
        def forward(self, x, w):
            def body(acc):
                return torch.tanh(acc @ w)
            return poptorch.for_loop(3, body, [x])[0]

    x, w = torch.rand(2, 4), torch.rand(4, 4)
    want = x
    for _ in range(3):
        want = torch.tanh(want @ w)
    pm = poptorch.inferenceModel(M())
    torch.testing.assert_close(pm(x, w), want, rtol=1e-5, atol=1e-6)
    pm.destroy()
    with pytest.raises(ValueError, match="to be a list of tensors"):
        poptorch.for_loop(2, lambda t: t, x)


def test_identity_ops_and_their_warnings():
    x = torch.rand(3)
    assert poptorch.nop(x) is x
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert poptorch.set_available_memory(x, 0.3) is x
        assert poptorch.set_available_memory(x, 0.4) is x
        a, b = poptorch.recomputationCheckpoint(x, x * 2)
        assert a is x
        assert poptorch.recomputationCheckpoint(x) is x
    assert sum("set_available_memory" in str(m.message) for m in w) <= 1
    assert sum("recomputationCheckpoint" in str(m.message) for m in w) <= 1
    with pytest.raises(poptorch.Error, match=r"proportion must be in \(0, 1\]"):
        poptorch.set_available_memory(x, 1.5)
    with poptorch.NameScope("block"):
        pass


def test_set_available_memory_of_a_constant(daemon):
    """set_available_memory of a tensor made inside forward (a Constant of the graph) is
    accepted, as PopTorch accepts it (inputs_test test_return_and_use_nested_input): the
    daemon refused the Constant given the proportion as a second attribute."""
    class M(nn.Module):
        def forward(self, x):
            c = poptorch.set_available_memory(torch.tensor([1.0]), 0.1)
            return c, (c, x + c)

    pm = poptorch.inferenceModel(M())
    for v in (0.0, 1.0):
        c, (c2, s) = pm(torch.tensor([v]))
        assert torch.equal(c, torch.tensor([1.0])) and torch.equal(c2, c)
        assert torch.equal(s, torch.tensor([v + 1.0]))


def test_refused_ops_say_why():
    with pytest.raises(poptorch.Error, match="custom ops are Poplar codelets"):
        poptorch.custom_op([torch.rand(2)], "Cube", "com.acme", 1, example_outputs=[])
    with pytest.raises(poptorch.Error, match="host callbacks"):
        poptorch.CPU(lambda x: x, "cb")
