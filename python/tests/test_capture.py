"""Issue 19's "wrong numbers without an error", each against PyTorch on the host, and the
capture's promise: compiling leaves the caller's tensors, the module's parameters and
buffers and the RNG as they were; a call leaves them as torch's call would."""
import copy

import pytest
import torch
import torch.nn as nn

import poptorch


class KwModel(nn.Module):
    def forward(self, x, y=None, t=None):
        out = x
        if y is not None:
            out = out + y
        if t is not None:
            out = out - t
        return out


def test_keyword_arguments_bind_to_their_parameters(daemon):
    """model(x=x, t=t) skips y: t must reach t (2 - 5 = -3), not y (2 + 5 = 7)."""
    x = torch.full((2, 3), 2.0)
    t = torch.full((2, 3), 5.0)
    pm = poptorch.inferenceModel(KwModel())
    out = pm(x=x, t=t)
    torch.testing.assert_close(out, KwModel()(x=x, t=t))
    assert float(out[0, 0]) == -3.0
    pm.destroy()


def test_keyword_only_defaults_and_var_args(daemon):
    class M(nn.Module):
        def forward(self, x, *rest, scale=2.0, shift=None, **named):
            out = x * scale
            for r in rest:
                out = out + r
            if shift is not None:
                out = out - shift
            for k in sorted(named):
                out = out * named[k]
            return out

    x, a, b = torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 3)
    s, z = torch.rand(2, 3), torch.rand(2, 3)
    m = M()
    pm = poptorch.inferenceModel(m)
    torch.testing.assert_close(pm(x, a, b, shift=s, zz=z, scale=3.0),
                               m(x, a, b, shift=s, zz=z, scale=3.0))
    pm.destroy()


class AddInPlace(nn.Module):
    def forward(self, x, y):
        x += y
        return x * 2


def test_in_place_input_change_applied_once(daemon):
    x = torch.tensor([[1.0, 2.0]])
    y = torch.tensor([[10.0, 20.0]])
    ref_x = x.clone()
    ref_out = AddInPlace()(ref_x, y)
    pm = poptorch.inferenceModel(AddInPlace())
    out = pm(x, y)
    torch.testing.assert_close(out, ref_out)  # 22, 44: not 42, 84
    torch.testing.assert_close(x, ref_x)      # 11, 22: changed once, as torch does
    out = pm(x, y)                            # and again on the next call
    torch.testing.assert_close(x, torch.tensor([[21.0, 42.0]]))
    torch.testing.assert_close(out, torch.tensor([[42.0, 84.0]]))
    pm.destroy()


def test_in_place_change_of_an_input_returning_nothing(daemon):
    class M(nn.Module):
        def forward(self, x):
            x += 1

    t = torch.tensor([1.0])
    pm = poptorch.inferenceModel(M())
    assert pm(t) is None
    assert float(t) == 2.0
    assert pm(t) is None
    assert float(t) == 3.0
    pm.destroy()


class BnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        out = self.bn(self.fc(x))
        return out, (out ** 2).mean()


def test_batchnorm_running_stats_counted_once(daemon):
    torch.manual_seed(0)
    net = BnNet()
    ref = copy.deepcopy(net)
    x = torch.randn(8, 4) * 3 + 1
    opt = torch.optim.SGD(ref.parameters(), lr=0.0)
    ref.train()
    _, loss = ref(x)
    loss.backward()
    opt.step()
    pm = poptorch.trainingModel(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.0))
    pm(x)
    sd = net.state_dict()
    torch.testing.assert_close(sd["bn.running_mean"], ref.bn.running_mean,
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sd["bn.running_var"], ref.bn.running_var,
                               rtol=1e-5, atol=1e-6)
    assert int(sd["bn.num_batches_tracked"]) == 1
    pm.destroy()


def test_compile_has_no_side_effects(daemon):
    """compile() leaves the caller's tensor, every parameter and buffer and the RNG state
    exactly as they were (the model changes its input in place, updates BatchNorm
    statistics and draws dropout masks)."""

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.bn = nn.BatchNorm1d(4)
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            x *= 2
            out = self.drop(self.bn(self.fc(x)))
            return out, out.sum()

    torch.manual_seed(0)
    m = M()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    x = torch.randn(8, 4)
    x0 = x.clone()
    rng = torch.random.get_rng_state()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    pm.compile(x)
    assert torch.equal(x, x0)
    assert torch.equal(torch.random.get_rng_state(), rng)
    for k, v in torch.nn.Module.state_dict(m).items():
        assert torch.equal(v, before[k]), k
    pm.destroy()


def test_floor_divide_floors(daemon):
    class F(nn.Module):
        def forward(self, a, b):
            return torch.floor_divide(a, b), a // 2

    for a, b in ((torch.tensor([[-7.0, 7.0, -3.0, 5.5]]), torch.tensor([[2.0, -2.0, 2.0, 3.0]])),
                 (torch.tensor([[-7, 7, -3, 5]]), torch.tensor([[2, -2, 2, 3]]))):
        pm = poptorch.inferenceModel(F())
        got = pm(a, b)
        want = F()(a, b)
        for g, w in zip(got, want):
            assert torch.equal(g, w), (g, w)
        pm.destroy()


@pytest.mark.parametrize("beta,threshold", [(1.0, 0.5), (2.0, 1.0), (1.0, 20.0)])
def test_softplus_keeps_its_threshold(daemon, beta, threshold):
    sp = nn.Softplus(beta=beta, threshold=threshold)
    x = torch.linspace(-3, 3, 16).reshape(2, 8)
    pm = poptorch.inferenceModel(sp)
    torch.testing.assert_close(pm(x), sp(x), rtol=1e-5, atol=1e-6)
    pm.destroy()


def test_load_state_dict_reaches_the_device(daemon):
    torch.manual_seed(0)
    a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    x = torch.rand(4, 3)
    pm = poptorch.inferenceModel(a)
    torch.testing.assert_close(pm(x), a(x))
    pm.load_state_dict(b.state_dict())
    torch.testing.assert_close(pm(x), b(x))
    pm.destroy()


def test_load_state_dict_on_a_training_model(daemon):
    torch.manual_seed(0)

    class L(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            out = self.fc(x)
            return out, poptorch.identity_loss(out.sum(), reduction="sum")

    a, b = L(), L()
    x = torch.rand(4, 3)
    pm = poptorch.trainingModel(a, optimizer=torch.optim.SGD(a.parameters(), lr=0.0))
    pm(x)
    pm.load_state_dict(b.state_dict())
    out, _ = pm(x)
    torch.testing.assert_close(out, b(x)[0][-4:] if out.shape[0] != 4 else b(x)[0])
    pm.destroy()


@pytest.mark.parametrize("reduction", ["sum", "mean", "none"])
def test_identity_loss_trains_as_torch(daemon, reduction):
    torch.manual_seed(1)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(5, 3)

        def forward(self, x):
            out = self.fc(x)
            return out, poptorch.identity_loss(out ** 2, reduction=reduction)

    m = M()
    ref = copy.deepcopy(m)
    x = torch.rand(4, 5)
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        _, l = ref(x)
        (l.sum() if reduction == "none" else l).backward()
        opt.step()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.05))
    for _ in range(3):
        out, loss = pm(x)
    if reduction != "none":
        assert loss.dim() == 0
    torch.testing.assert_close(m.fc.weight, ref.fc.weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m.fc.bias, ref.fc.bias, rtol=1e-5, atol=1e-6)
    pm.destroy()


def test_identity_loss_on_the_host():
    x = torch.tensor([1.0, 2.0, 3.0])
    assert float(poptorch.identity_loss(x, reduction="sum")) == 6.0
    assert float(poptorch.identity_loss(x, reduction="mean")) == 2.0
    assert poptorch.identity_loss(x, reduction="none") is x
    with pytest.raises(poptorch.Error, match="reduction must be"):
        poptorch.identity_loss(x, reduction="max")


def test_nested_inputs_and_outputs(daemon):
    class M(nn.Module):
        def forward(self, pair, items, table, flag=None, k=3.0):
            a, (b, c) = pair
            out = a + b * c + items[0] - items[1] + table["u"] * k
            if flag is not None:
                out = out * flag
            return {"sum": out, "parts": (a * 2, [table["v"] + 1, None])}

    t = [torch.rand(2, 3) for _ in range(7)]
    args = ((t[0], (t[1], t[2])), [t[3], t[4]], {"u": t[5], "v": t[6]})
    m = M()
    pm = poptorch.inferenceModel(m)
    got, want = pm(*args), m(*args)
    assert isinstance(got, dict) and list(got) == ["sum", "parts"]
    torch.testing.assert_close(got["sum"], want["sum"])
    torch.testing.assert_close(got["parts"][0], want["parts"][0])
    assert isinstance(got["parts"][1], list) and got["parts"][1][1] is None
    torch.testing.assert_close(got["parts"][1][0], want["parts"][1][0])
    # Other values in the same structure: the same graph.
    t2 = [torch.rand(2, 3) for _ in range(7)]
    args2 = ((t2[0], (t2[1], t2[2])), [t2[3], t2[4]], {"u": t2[5], "v": t2[6]})
    torch.testing.assert_close(pm(*args2)["sum"], m(*args2)["sum"])
    # Another constant is another graph: refused with a sentence, not silently wrong.
    with pytest.raises(poptorch.Error, match="Value mismatch for k: expected 3.0 but got 4.0"):
        pm(*args2, k=4.0)
    # A dict's keys in another order are the same inputs; a missing key is named.
    args3 = (args2[0], args2[1], {"v": t2[6], "u": t2[5]})
    torch.testing.assert_close(pm(*args3)["sum"], m(*args3)["sum"])
    with pytest.raises(poptorch.Error, match=r"Keys mismatch for table: Missing arguments: v"):
        pm(args2[0], args2[1], {"u": t2[5]})
    with pytest.raises(poptorch.Error, match=r"Shape mismatch for items\[1\]: expected "
                       r"torch.Size\(\[2, 3\]\) but got torch.Size\(\[2, 4\]\)"):
        pm(args2[0], [t2[3], torch.rand(2, 4)], args2[2])
    with pytest.raises(poptorch.Error, match=r"Data type mismatch for items\[0\]: expected "
                       r"torch.float32 but got torch.int64"):
        pm(args2[0], [torch.ones(2, 3, dtype=torch.long), t2[4]], args2[2])
    # destroy(): the next call compiles again, for whatever inputs it has.
    pm.destroy()
    torch.testing.assert_close(pm(*args2, k=4.0)["sum"], m(*args2, k=4.0)["sum"])
    pm.destroy()


@pytest.mark.parametrize("loss_cls", [nn.MSELoss, nn.L1Loss])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1_losses_capture_and_train(daemon, loss_cls, reduction):
    """The exporter has no symbolic for aten::mse_loss / l1_loss: the package's."""
    torch.manual_seed(2)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.loss = loss_cls(reduction=reduction)

        def forward(self, x, y):
            out = self.fc(x)
            loss = self.loss(out, y)
            return out, poptorch.identity_loss(loss, reduction="none" if reduction != "none"
                                               else "sum")

    m = M()
    ref = copy.deepcopy(m)
    x, y = torch.rand(5, 4), torch.rand(5, 3)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt.zero_grad()
    _, l = ref(x, y)
    l.backward()
    opt.step()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    _, loss = pm(x, y)
    torch.testing.assert_close(loss, l.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m.fc.weight, ref.fc.weight, rtol=1e-5, atol=1e-6)
    pm.destroy()


def test_inputs_without_a_batch_dimension(daemon):
    """With one sample per call every input is taken whole: a scalar, or a matrix whose
    first dimension is not the batch's."""
    class M(nn.Module):
        def forward(self, x, w, s):
            return (x @ w) * s

    x, w, s = torch.rand(3, 4), torch.rand(4, 5), torch.tensor(2.5)
    pm = poptorch.inferenceModel(M())
    torch.testing.assert_close(pm(x, w, s), (x @ w) * s, rtol=1e-5, atol=1e-6)
    pm.destroy()


def test_model_without_inputs(daemon):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([1.0, -2.0]))

        def forward(self):
            return torch.relu(self.w) * 3

    pm = poptorch.inferenceModel(M())
    torch.testing.assert_close(pm(), torch.tensor([3.0, 0.0]))
    torch.testing.assert_close(pm(), torch.tensor([3.0, 0.0]))
    pm.destroy()


@pytest.mark.parametrize("training", [False, True])
def test_group_norm_matches_torch(daemon, training):
    """nn.GroupNorm (the exporter's InstanceNormalization is not a daemon op): the
    package's decomposition, forward and one SGD step."""
    torch.manual_seed(3)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3)
            self.gn = nn.GroupNorm(3, 6)

        def forward(self, x):
            out = self.gn(self.conv(x))
            return out, (out ** 2).mean()

    m = M()
    ref = copy.deepcopy(m)
    x = torch.rand(2, 3, 6, 6)
    if not training:
        pm = poptorch.inferenceModel(m)
        out, _ = pm(x)
        torch.testing.assert_close(out, ref(x)[0], rtol=1e-4, atol=1e-5)
        return
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt.zero_grad()
    ref(x)[1].backward()
    opt.step()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    pm(x)
    torch.testing.assert_close(m.gn.weight, ref.gn.weight, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(m.conv.weight, ref.conv.weight, rtol=1e-4, atol=1e-5)
    pm.destroy()


def test_nansum_and_count_nonzero(daemon):
    class M(nn.Module):
        def forward(self, x):
            return torch.nansum(x, dim=1), torch.nansum(x), torch.count_nonzero(x, dim=1)

    x = torch.tensor([[1.0, float("nan"), 2.0, 0.0], [float("nan"), -1.0, 0.0, 0.0]])
    pm = poptorch.inferenceModel(M())
    for got, want in zip(pm(x), M()(x)):
        torch.testing.assert_close(got, want)
    pm.destroy()


def test_model_with_no_output_and_no_effect(daemon):
    class M(nn.Module):
        def forward(self, x):
            x * 2  # computes nothing anyone sees

    pm = poptorch.inferenceModel(M())
    assert pm(torch.rand(2, 3)) is None
    assert pm(torch.rand(2, 3)) is None
    pm.destroy()


def test_a_buffer_changed_in_place_is_carried_not_silently_stale(daemon):
    """forward() that accumulates into a buffer and reads it on the way to the loss: the
    daemon carries it from step to step (it once computed every step from the buffer's
    first value; PopTorch's buffers_test gave 0 where torch gives 7.75); the capture
    leaves the host's buffer alone, the run brings back torch's."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.register_buffer("seen", torch.zeros(2))

        def forward(self, x):
            with torch.no_grad():
                self.seen += x.sum(0)
            out = self.fc(x) + self.seen
            return out, out.sum()

    torch.manual_seed(0)
    m = M()
    ref = copy.deepcopy(m)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    xs = [torch.rand(4, 2) for _ in range(3)]
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    pm.compile(xs[0])
    assert torch.equal(m.seen, torch.zeros(2))  # the capture left it alone
    for x in xs:
        opt.zero_grad()
        want, loss = ref(x)
        loss.backward()
        opt.step()
        got, _ = pm(x)
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m.seen, ref.seen)
    torch.testing.assert_close(m.fc.weight, ref.fc.weight, rtol=1e-5, atol=1e-6)
    pm.destroy()


def test_instance_norm_with_running_stats_in_eval_is_not_a_buffer_change(daemon):
    """instance_norm copies its running statistics back unchanged in eval mode (their
    version counters move): not a change."""
    torch.manual_seed(0)
    m = nn.InstanceNorm1d(3, track_running_stats=True)
    m.running_mean.uniform_()
    m.running_var.uniform_(0.5, 1.5)
    m.eval()
    x = torch.randn(2, 3, 5)
    pm = poptorch.inferenceModel(m)
    torch.testing.assert_close(pm(x), m(x), rtol=1e-4, atol=1e-5)
    pm.destroy()


@pytest.mark.parametrize("how", ["detach", "unused"])
def test_parameters_without_gradient_do_not_train(daemon, how):
    """A layer whose output is detached (or not used by the loss) gets no gradient in
    torch, and torch's SGD leaves it alone; the ONNX graph has no detach, so the daemon
    trained it (a wrong number): such parameters are frozen."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.first = nn.Linear(4, 4)
            self.second = nn.Linear(4, 4)

        def forward(self, x, t):
            h = self.first(x)
            if how == "detach":
                h = h.detach()
            else:
                h = x
            out = self.second(h)
            return out, nn.functional.mse_loss(out, t)

    m = M()
    ref = copy.deepcopy(m)
    x, t = torch.randn(3, 4), torch.randn(3, 4)
    pm = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1,
                                                             weight_decay=0.01))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, weight_decay=0.01)
    for _ in range(3):
        pm(x, t)
        opt.zero_grad()
        ref(x, t)[1].backward()
        opt.step()
    assert torch.equal(m.first.weight.detach(), ref.first.weight.detach())  # untouched
    torch.testing.assert_close(m.second.weight.detach(), ref.second.weight.detach(),
                               rtol=1e-5, atol=1e-6)
    pm.destroy()


def test_compile_under_inference_mode(daemon):
    """compile() inside torch.inference_mode(): the capture's copies of the inputs are
    ordinary tensors (inference tensors keep no version counter, which it reads)."""
    m = nn.Linear(4, 2).eval()
    pm = poptorch.inferenceModel(m)
    x = torch.rand(3, 4)
    with torch.inference_mode():
        pm.compile(x)
        out = pm(x)
    torch.testing.assert_close(out, m(x))
    pm.destroy()


def test_copy_into_an_input(daemon):
    """y.copy_(x) into an input: the exporter keeps x's values; with y of another dtype
    the conversion it dropped (the graph gave 9.1 where torch gives 8) is the index_put
    symbolic's Cast: torch's numbers, negative values truncated toward zero as torch does."""
    class M(nn.Module):
        def forward(self, x, y):
            return y.copy_(x) * 2

    x = torch.randn(2, 3) * 4
    pm = poptorch.inferenceModel(M())
    torch.testing.assert_close(pm(x, torch.zeros(2, 3)), x * 2)
    pm.destroy()
    pm = poptorch.inferenceModel(M())
    want = M()(x, torch.zeros(2, 3, dtype=torch.int32))
    got = pm(x, torch.zeros(2, 3, dtype=torch.int32))
    assert got.dtype == torch.int32 and torch.equal(got, want)
    pm.destroy()


def test_copy_of_a_computed_tensor(daemon):
    """Tensor.copy_ of a tensor the model made: aten::copy, which the exporter lacks (a
    symbolic here: src in the destination's dtype, broadcast to its shape)."""
    class M(nn.Module):
        def forward(self, x):
            buf = torch.zeros(2, 3, dtype=torch.int32)
            buf.copy_(x[0])
            return buf + 1

    x = torch.tensor([[1.7, -2.5, 3.2]])
    pm = poptorch.inferenceModel(M())
    out = pm(x)
    want = M()(x)
    assert out.dtype == want.dtype
    torch.testing.assert_close(out, want)
    pm.destroy()


@pytest.mark.parametrize("how", ["remove", "reassign"])
def test_forward_that_removes_or_reassigns_a_buffer_is_refused(daemon, how):
    """PopTorch's errors: the graph would hold the old buffer."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("y", torch.tensor([2.0]))

        def forward(self, x):
            if how == "remove":
                del self._buffers["y"]
            else:
                self.y = x
            return x + 1

    m = M()
    pm = poptorch.inferenceModel(m)
    word = "removed from" if how == "remove" else "reassigned within"
    with pytest.raises(poptorch.Error, match=f"Buffer y is {word} the model"):
        pm(torch.tensor([5.0]))
    assert "y" in m._buffers and torch.equal(m.y, torch.tensor([2.0]))  # left as it was


def test_buffer_changed_in_place_with_replicas_names_broadcasting(daemon):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.register_buffer("b", torch.zeros(2))

        def forward(self, x, t):
            with torch.no_grad():
                self.b += 1
            out = self.fc(x)
            return out, nn.functional.mse_loss(out, t)

    pm = poptorch.trainingModel(M(), poptorch.Options().replicationFactor(2))
    with pytest.raises(poptorch.Error, match="does not support broadcasting buffers"):
        pm(torch.rand(4, 2), torch.rand(4, 2))


def test_input_requiring_grad_warns(daemon, capfd):
    """PopTorch's warning for an input with requires_grad=True (no gradient flows back to
    it), on the stderr the caller has at the time (captured here by pytest)."""
    pm = poptorch.inferenceModel(torch.nn.Linear(1, 1))
    try:
        pm(torch.tensor([0.0], requires_grad=True))
        out, err = capfd.readouterr()
        assert "Input tensor has requires_grad=True set. This tensor will be detached " \
            "because backward pass via inputs is not supported." in out + err
    finally:
        pm.destroy()
