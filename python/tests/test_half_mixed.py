"""float16 values meeting float32 module state or float32 inputs, and float16 inputs a
model writes into, as PopTorch gives them: a float32 parameter used by an op of a float16
input is converted to float16 ("the parameters will be converted to float16 if you call an
operation with a float16 input"), two tensors promote as in torch. PopTorch's own suite:
tensor_ops_test.py test_zeros_and_ones[float16] and its two siblings (a float16 input
through a float32 Linear in a training model), test_copy_[half], half_test's
test_half_float_default_option and test_half_casts_outplace, norms_test's
test_groupNorm_typing."""
import copy

import torch
import torch.nn as nn

import poptorch


class _LinearLoss(nn.Module):
    """A float32 Linear on a float16 input, a float16 constant added, a sum-of-squares
    loss: PopTorch suite's ModelWithWeights around torch.ones(dtype=float16)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        y = self.lin(x) + torch.ones(6, dtype=torch.float16)
        return y, poptorch.identity_loss(y ** 2, reduction="sum")


def _torch_reference(model, x):
    """torch's float32 run of model on x widened (exact: a float16 widens to the same
    value), and the weights after one SGD step of lr 0.01."""
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    y = ref.lin(x.float()) + 1.0
    loss = (y ** 2).sum()
    loss.backward()
    opt.step()
    return y.detach(), loss.detach(), ref


def test_half_input_into_float_layer_trains_in_float16(daemon):
    """The loss was refused ("the loss 'output2' is float16 ... a loss must be one float"):
    the capture declared the Linear's result float while the daemon computed float16. It
    is float16 (PopTorch's), the loss comes back float16 and the float32 weights train.
    Against torch in float32 on the same (exactly widened) input: float16 rounds each of
    the Linear, the add and the square (2^-11 relative each), so rtol 2^-8; the step is
    lr times a gradient computed in float16, so the weights within 2^-8 of the update."""
    torch.manual_seed(0)
    m = _LinearLoss()
    x = torch.randn(6).half()
    want_y, want_loss, ref = _torch_reference(m, x)
    w0 = m.lin.weight.detach().clone()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.01))
    y, loss = pm(x)
    assert y.dtype == torch.float16 and loss.dtype == torch.float16
    diff = (y.float() - want_y).abs().max().item()
    print(f"max |y - torch float32| = {diff:.3g}")
    torch.testing.assert_close(y.float(), want_y, rtol=2 ** -8, atol=2 ** -10)
    torch.testing.assert_close(loss.float(), want_loss, rtol=2 ** -8, atol=2 ** -10)
    pm.copyWeightsToHost()
    assert m.lin.weight.dtype == torch.float32
    step, want_step = m.lin.weight.detach() - w0, ref.lin.weight.detach() - w0
    torch.testing.assert_close(step, want_step, rtol=2 ** -7, atol=2 ** -7 * 0.01)


def test_half_input_into_float_layer_inference(daemon):
    torch.manual_seed(1)
    m = nn.Sequential(nn.Linear(5, 3), nn.ReLU())
    x = torch.randn(4, 5).half()
    want = copy.deepcopy(m)(x.float())
    pm = poptorch.inferenceModel(m)
    out = pm(x)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.float(), want, rtol=2 ** -8, atol=2 ** -10)
    pm.destroy()


def test_copy_into_half_input_gives_float16(daemon):
    """y.copy_(x) returns y, a float16 input: the output is float16 (it came back
    float32) with torch's rounding of x, and the caller's y holds it."""
    class M(nn.Module):
        def forward(self, x, y):
            return y.copy_(x)

    torch.manual_seed(2)
    x = torch.randn(2, 3) * 1000
    y = torch.empty(2, 3, dtype=torch.float16)
    want = torch.empty(2, 3, dtype=torch.float16).copy_(x)
    pm = poptorch.inferenceModel(M())
    out = pm(x, y)
    assert out.dtype == torch.float16
    assert torch.equal(out, want)
    assert torch.equal(y, want)
    pm.destroy()


def test_half_input_meeting_float_input_is_float32(daemon):
    """x + y of a float16 x and a float32 y is float32 in torch (it came back float16;
    PopTorch's half_test test_half_float_default_option), either order."""
    class Add(nn.Module):
        def forward(self, a, b):
            return a + b

    x = torch.tensor([1.0, 2049.0, -3.5]).half()   # 2049 rounds to 2048 in float16
    y = torch.tensor([2.0, 1.0, 0.25])
    for a, b in ((x, y), (y, x)):
        pm = poptorch.inferenceModel(Add())
        out = pm(a, b)
        want = a + b
        assert out.dtype == want.dtype == torch.float32
        assert torch.equal(out, want)   # float16 widens exactly; one float32 rounding
        pm.destroy()


def test_cast_to_half_in_float_model(daemon):
    """x.half() / x.to(torch.float16) of a float32 model's input: a float16 output
    (refused at capture: "computes output 2 as float16"; PopTorch's half_test
    test_half_casts_outplace), rounded as torch rounds."""
    class M(nn.Module):
        def forward(self, a):
            return a, a.to(torch.float16), a.half() * 2

    a = torch.tensor([0.1, 1e5, -2049.0, 3e-8])
    want = M()(a)
    out = poptorch.inferenceModel(M())(a)
    for o, w in zip(out, want):
        assert o.dtype == w.dtype
        assert torch.equal(o, w)


def test_float_group_norm_keeps_a_half_input_half(daemon):
    """A float32 GroupNorm given a float16 input gives float16, as PopTorch's (norms_test
    test_groupNorm_typing): its float32 weight and bias are used as float16. Within
    float16's rounding of torch's float32 result (each op rounds: rtol 2^-8)."""
    torch.manual_seed(4)
    m = nn.GroupNorm(4, 16)
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-0.5, 0.5)
    x = torch.randn(3, 16, 10).half()
    want = copy.deepcopy(m)(x.float())
    out = poptorch.inferenceModel(m)(x)
    assert out.dtype == torch.float16
    diff = (out.float() - want).abs().max().item()
    print(f"max |out - torch float32| = {diff:.3g}")
    torch.testing.assert_close(out.float(), want, rtol=2 ** -8, atol=2 ** -9)
