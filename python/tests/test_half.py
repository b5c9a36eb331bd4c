"""float16 models and inputs: captured in float32 and typed float16 as torch computes them
(each op's result rounded to float16 by the daemon: test_half_ops.py), the module left in
float16; float16 inputs and outputs travel to and from the daemon as 2-byte halves."""
import copy

import torch
import torch.nn as nn

import poptorch


def test_half_model_inference_matches_float32_torch(daemon):
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    m = copy.deepcopy(ref).half()
    x = torch.rand(2, 3, 8, 8)
    pm = poptorch.inferenceModel(m)
    out = pm(x.half())
    assert out.dtype == torch.float16
    assert all(p.dtype == torch.float16 for p in m.parameters())
    # The weights are float16 (rounded from ref's); the result is float32's of those
    # weights rounded to float16: within float16's 2^-11 relative step of torch's float32
    # result of the float16 weights.
    want = copy.deepcopy(m).float()(x.half().float())
    torch.testing.assert_close(out.float(), want, rtol=2 ** -10, atol=1e-3)
    pm.destroy()


def test_half_model_trains_and_weights_come_back_half(daemon):
    torch.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            out = self.fc(x)
            return out, poptorch.identity_loss(out ** 2, reduction="mean")

    m = M().half()
    w0 = m.fc.weight.detach().clone()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    out, loss = pm(torch.rand(8, 4).half())
    assert out.dtype == torch.float16 and loss.dtype == torch.float16
    assert m.fc.weight.dtype == torch.float16
    assert not torch.equal(m.fc.weight.detach(), w0)
    pm.destroy()


def test_outputs_keep_the_dtype_torch_gives(daemon):
    """A float32 model whose outputs torch gives as float16 or float64 (nansum(dtype=),
    .double()): computed in float32 on the daemon, given back in torch's dtype (they came
    back float32)."""
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.nansum(x, dim=1, dtype=torch.float16), x.double() * 3

    x = torch.tensor([[1.0, float("nan"), 2.5], [0.25, 4.0, float("nan")]])
    pm = poptorch.inferenceModel(M())
    got = pm(x)
    want = M()(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, equal_nan=True)
    pm.destroy()


def test_half_inputs_and_outputs_travel_as_float16(daemon):
    """The executable's float16 inputs and outputs are float16 on the wire (2 bytes per
    element); the daemon rounds the float32 result to nearest even, as torch's .half()."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 7)).half()
    x = (torch.rand(4, 6) * 4).half()
    pm = poptorch.inferenceModel(m)
    out = pm(x)
    ins = pm._exe.inputs
    outs = pm._exe.outputs
    assert [i["dtype"] for i in ins] == [10] and [o["dtype"] for o in outs] == [10]
    assert out.dtype == torch.float16
    want = copy.deepcopy(m).float()(x.float()).half()
    # the same float32 graph, its result rounded once by the daemon: torch's rounding of
    # its float32 result up to float32 summation order (within one float16 step, 2^-11)
    torch.testing.assert_close(out, want, rtol=2 ** -10, atol=2 ** -14)
    pm.destroy()


def test_half_training_inputs_travel_as_float16(daemon):
    """A training model's float16 inputs and outputs travel as float16, except the loss,
    which is float on the device (the optimizer's loss) and comes back as float16."""
    torch.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            out = self.fc(x)
            return out, poptorch.identity_loss(out ** 2, reduction="mean")

    m = M().half()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    out, loss = pm(torch.rand(8, 4).half())
    assert [i["dtype"] for i in pm._exe.inputs] == [10]
    assert [o["dtype"] for o in pm._exe.outputs] == [10, 1]
    assert out.dtype == torch.float16 and loss.dtype == torch.float16
    pm.destroy()


def test_half_training_linear_on_3d_input(daemon):
    """A float16 Linear on a (B, S, F) input trains: torch.onnx exports it as MatMul with
    the weight through a Transpose, whose input (a float16 weight, held by the daemon as
    floats) was moved as if it were 2-byte halves: outputs off by thousands (BERT's
    attention scores overflowed to inf and its losses were NaN). The output and the
    weights after an SGD step against torch in float32 on the float16 weights."""
    torch.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 24)

        def forward(self, x):
            out = self.fc(x)
            return out, poptorch.identity_loss(out.float().pow(2).mean(), reduction="none")

    m = M().half()
    ref = copy.deepcopy(m).float()
    x = torch.randn(2, 5, 16).half()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    out, loss = pm(x)
    want = ref(x.float())[0]
    torch.testing.assert_close(out.float(), want, rtol=2 ** -9, atol=2e-3)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref(x.float())[1].backward()
    opt.step()
    pm.copyWeightsToHost()
    torch.testing.assert_close(m.fc.weight.float(), ref.fc.weight, rtol=2 ** -9, atol=2e-3)
    torch.testing.assert_close(m.fc.bias.float(), ref.fc.bias, rtol=2 ** -9, atol=2e-3)
    pm.destroy()
