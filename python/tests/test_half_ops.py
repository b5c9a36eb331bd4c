"""Half precision as the IPU computes it: a float16 model is typed float16 tensor by tensor
and the daemon rounds every op's result to float16 as it writes it (sim/README.md
"Dtypes"), float16 weights train with the update rounded to float16, stochastic rounding
is seeded, and the memory plan counts 2 bytes per float16 element.

Tolerances. float16's relative step is 2^-10 (unit roundoff u = 2^-11). Against a torch
reference that rounds after every op as the daemon does (float32 math, float16 results),
the only difference is the order of float32 sums, which can move a rounding by one step:
rtol 2^-10. Against torch's float32 result of the same float16 weights and inputs, each
of the L rounded ops (Gemm, Conv, ...; ReLU and MaxPool are exact) adds at most u of
its output's magnitude, carried through the layers after it: |out - ref| <= 4 L u max|ref|
(4: the growth through the weights here, measured below 2).
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import poptorch

U = 2.0 ** -11


def r16(t):
    return t.half().float()


def mlp():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def per_op_mlp(m, x):
    """The MLP as the IPU computes it in float16: each Gemm in float32, its result
    rounded to float16."""
    h = x.float()
    for layer in m:
        if isinstance(layer, nn.Linear):
            h = r16(F.linear(h, layer.weight.float(), layer.bias.float()))
        else:
            h = layer(h)
    return h


def test_half_mlp_rounds_every_op(daemon):
    m = mlp().half()
    x = torch.randn(8, 16).half()
    pm = poptorch.inferenceModel(m)
    out = pm(x)
    assert out.dtype == torch.float16
    assert [o["dtype"] for o in pm._exe.outputs] == [10]
    per_op = per_op_mlp(m, x)
    ref = copy.deepcopy(m).float()(x.float())
    d_op = (out.float() - per_op).abs().max().item()
    d_32 = (out.float() - ref).abs().max().item()
    bound = 4 * 3 * U * ref.abs().max().item()
    print(f"max |out - per-op reference| {d_op:.3g}, |out - float32| {d_32:.3g} "
          f"(bound {bound:.3g})")
    torch.testing.assert_close(out.float(), per_op, rtol=2 ** -10, atol=2 ** -14)
    assert d_32 <= bound
    pm.destroy()


def test_half_convnet_inference(daemon):
    torch.manual_seed(2)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 8, 3), nn.ReLU(), nn.Flatten(),
                      nn.Linear(8 * 2 * 2, 5)).half()
    x = torch.randn(4, 3, 8, 8).half()
    pm = poptorch.inferenceModel(m)
    try:
        out = pm(x)
    finally:
        pm.destroy()    # a failure below must not keep the IPU from the tests after it
    assert out.dtype == torch.float16
    f = copy.deepcopy(m).float()
    h = x.float()
    for layer in f:   # per op: each Conv / Gemm rounded to float16
        h = layer(h)
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            h = r16(h)
    ref = f(x.float())
    d_32 = (out.float() - ref).abs().max().item()
    bound = 4 * 3 * U * ref.abs().max().item()
    print(f"conv net: |out - per-op| {(out.float() - h).abs().max().item():.3g}, "
          f"|out - float32| {d_32:.3g} (bound {bound:.3g})")
    torch.testing.assert_close(out.float(), h, rtol=2 ** -10, atol=2 ** -14)
    assert d_32 <= bound


def test_per_op_rounding_is_not_round_once(daemon):
    """(x + 1024) - 1024 in float16 rounds x to an integer (float16's step at 1024 is 1):
    computed in float32 and rounded once it would give x back (main did that)."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", torch.tensor(1024.0))

        def forward(self, x):
            return (x + self.a) - self.a

    m = M().half()
    x = torch.tensor([0.3, 0.7, 2.5, -1.25]).half()
    out = poptorch.inferenceModel(m)(x)
    assert out.tolist() == [0.0, 1.0, 2.0, -1.0]


def train_mlp(half, steps=5, stochastic=False, seed=0):
    m = mlp()
    if half:
        m = m.half()
    torch.manual_seed(3)
    xs = [torch.randn(8, 16) for _ in range(steps)]
    ys = [torch.randn(8, 4) for _ in range(steps)]

    class Loss(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, y):
            out = self.net(x)
            return out, poptorch.identity_loss(((out - y) ** 2).mean(), reduction="none")

    w = Loss(m)
    opts = poptorch.Options().randomSeed(seed)
    if stochastic:
        opts.Precision.enableStochasticRounding(True)
    pm = poptorch.trainingModel(w, opts, optimizer=poptorch.optim.SGD(m.parameters(), lr=0.05))
    dt = torch.float16 if half else torch.float32
    losses = [pm(x.to(dt), y.to(dt))[1].float().item() for x, y in zip(xs, ys)]
    pm.copyWeightsToHost()
    pm.destroy()
    return m, losses


def test_half_mlp_trains_like_float32(daemon):
    """Five SGD steps of a float16 MLP against torch's float32 training of the same
    float16 initial weights: the losses within 2 % (each step's update is rounded to
    float16, u = 2^-11 relative per weight, over 5 steps and 3 layers), the weights
    float16 values that moved."""
    m16, l16 = train_mlp(True)
    m0 = mlp().half()
    ref = copy.deepcopy(m0).float()
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    torch.manual_seed(3)
    xs = [torch.randn(8, 16) for _ in range(5)]
    ys = [torch.randn(8, 4) for _ in range(5)]
    lref = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = ((ref(x.half().float()) - y.half().float()) ** 2).mean()
        lref.append(loss.item())
        loss.backward()
        opt.step()
    print("float16 losses", [round(v, 4) for v in l16], "float32", [round(v, 4) for v in lref])
    for a, b in zip(l16, lref):
        assert abs(a - b) <= 0.02 * abs(b)
    assert all(p.dtype == torch.float16 for p in m16.parameters())
    assert not torch.equal(m16[0].weight, m0[0].weight)
    for p, q in zip(m16.parameters(), ref.parameters()):
        torch.testing.assert_close(p.float(), q, rtol=0.02, atol=3e-3)


def test_stochastic_rounding_reproducible(daemon):
    """enableStochasticRounding: the same seed gives the same weights; another seed
    other weights (each update's rounding draws differ)."""
    a, la = train_mlp(True, steps=3, stochastic=True, seed=7)
    b, lb = train_mlp(True, steps=3, stochastic=True, seed=7)
    c, _ = train_mlp(True, steps=3, stochastic=True, seed=8)
    assert la == lb
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    assert any(not torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))


def test_mixed_precision_model_keeps_torch_dtypes(daemon):
    """A float16 layer, then .float() and a float32 layer: the first computes in float16
    (its result rounded), the second in float32, the output float32 as torch gives it."""
    torch.manual_seed(4)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8).half()
            self.b = nn.Linear(8, 3)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)).float())

    m = M()
    x = torch.randn(4, 8).half()
    pm = poptorch.inferenceModel(m)
    out = pm(x)
    assert out.dtype == torch.float32
    assert [o["dtype"] for o in pm._exe.outputs] == [1]
    h = torch.relu(r16(F.linear(x.float(), m.a.weight.float(), m.a.bias.float())))
    want = F.linear(h, m.b.weight, m.b.bias)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    pm.destroy()


def _ipu_memory(pm):
    from ipuof import _lib
    try:
        _lib.ffi.cdef("int ipuof_model_memory(const ipuof_model *m, size_t i, "
                      "unsigned *ipu_id, uint64_t *weights, uint64_t *activations, "
                      "uint64_t *code, uint64_t *total, uint64_t *capacity);")
    except Exception:  # noqa: B902 - declared by an earlier call
        pass
    v = [_lib.ffi.new("uint64_t *") for _ in range(5)]
    ipu = _lib.ffi.new("unsigned *")
    assert _lib.lib.ipuof_model_memory(pm._exe.ptr, 0, ipu, *v) == 0
    return v[0][0], v[1][0]


def test_memory_of_half_model_is_about_half(daemon):
    m32 = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    m16 = copy.deepcopy(m32).half()
    x = torch.randn(64, 256)
    p32, p16 = poptorch.inferenceModel(m32), poptorch.inferenceModel(m16)
    p32(x)
    p16(x.half())
    w32, a32 = _ipu_memory(p32)
    w16, a16 = _ipu_memory(p16)
    print(f"weights float32 {w32} float16 {w16}; activations float32 {a32} float16 {a16}")
    assert w16 * 2 == w32
    assert a16 * 2 == pytest.approx(a32, rel=0.05)
    p32.destroy()
    p16.destroy()


def test_partials_half_accumulates_in_float16(daemon):
    """setPartialsType(torch.half): a float16 Linear sums its 64 products in chunks of 16,
    each chunk's float sum added to a float16 accumulator (sim/README.md "Dtypes"):
    2048 + 63/16 gives 2048 (float32 partials: 2052), and random data equals the chunked
    reference."""
    lin = nn.Linear(64, 3).half()
    with torch.no_grad():
        lin.bias.zero_()
        lin.weight.fill_(1.0)
    x = torch.full((2, 64), 1.0 / 16).half()
    x[:, 0] = 2048
    outs = []
    for dt in (torch.float, torch.half):
        opts = poptorch.Options()
        opts.Precision.setPartialsType(dt)
        outs.append(poptorch.inferenceModel(copy.deepcopy(lin), opts)(x))
    assert outs[0][0, 0].item() == 2052 and outs[1][0, 0].item() == 2048
    torch.manual_seed(5)
    lin = nn.Linear(64, 3).half()
    x = torch.randn(4, 64).half()
    opts = poptorch.Options()
    opts.Precision.setPartialsType(torch.half)
    out = poptorch.inferenceModel(lin, opts)(x)
    prods = x.float()[:, None, :] * lin.weight.float()[None, :, :]
    acc = torch.zeros(4, 3)
    for k0 in range(0, 64, 16):
        acc = r16(acc + prods[:, :, k0:k0 + 16].sum(-1))
    want = r16(acc + lin.bias.float())
    # the chunk's float sum may differ from torch's order by a float32 rounding
    torch.testing.assert_close(out.float(), want, rtol=2 ** -10, atol=0)
    with pytest.raises(ValueError, match="setPartialsType"):
        poptorch.Options().Precision.setPartialsType(torch.int32)


def test_half_pipeline_sums_float16_gradients(daemon):
    """A float16 activation read on two other IPUs of a pipeline sends two float16
    gradients back, summed as float16 where it was made (before, the exchange added them
    as floats: wrong numbers, and twice its bytes read). The weights after two steps
    match the same model on one IPU (no exchange) within float16's rounding of the sum's
    order."""
    import contextlib

    class M(nn.Module):
        def __init__(self, pipelined):
            super().__init__()
            self.block = poptorch.Block if pipelined else \
                (lambda *_a, **_k: contextlib.nullcontext())
            torch.manual_seed(6)
            self.f0, self.f1 = nn.Linear(6, 6), nn.Linear(6, 6)
            self.f2, self.f3 = nn.Linear(6, 3), nn.Linear(6, 3)

        def forward(self, x, y):
            with self.block("s0", ipu_id=0):
                h = self.f0(x)
            with self.block("s1", ipu_id=1):
                a = torch.relu(self.f1(h))
            with self.block("s2", ipu_id=2):
                out = self.f2(a) + self.f3(h)
                loss = poptorch.identity_loss(((out - y) ** 2).mean(), reduction="none")
            return out, loss

    torch.manual_seed(7)
    xs, ys = torch.randn(2, 4, 6).half(), torch.randn(2, 4, 3).half()
    weights = []
    for pipelined in (False, True):
        m = M(pipelined).half()
        opts = poptorch.Options().autoRoundNumIPUs(True)
        if pipelined:
            opts.setExecutionStrategy(poptorch.PipelinedExecution("s0", "s1", "s2"))
            opts.Training.gradientAccumulation(5)    # PopTorch: at least 2 x 3 - 1
        pm = poptorch.trainingModel(m, opts, optimizer=poptorch.optim.SGD(m.parameters(),
                                                                         lr=0.1))
        n = 5 if pipelined else 1   # the same mean gradient over 5 micro-batches
        for x, y in zip(xs, ys):
            pm(x.repeat(n, 1), y.repeat(n, 1))
        if pipelined:
            assert pm._ipus == 3
        pm.copyWeightsToHost()
        pm.destroy()
        weights.append([p.detach().float().clone() for p in m.parameters()])
    for p, q in zip(*weights):
        torch.testing.assert_close(p, q, rtol=2 ** -8, atol=2 ** -10)


def test_half_model_given_float_inputs_trains_in_float16(daemon):
    """A .half() model given float32 inputs (PopTorch's suite does this: the weights
    decide): x @ W with W float16 is a float16 op in training too, where the daemon holds
    W as floats of float16 values (it was compiled as a float op: "graph output 'output0'
    is declared float16 but computes float"). With x exactly representable in float16,
    the float32 and the float16 input give the same outputs and the same weights."""
    results = []
    x = torch.randn(4, 6).half().float()
    for given in (x, x.half()):
        torch.manual_seed(3)
        m = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).half()

        class Loss(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, v):
                out = self.m(v)
                return out, poptorch.identity_loss((out.float() ** 2).mean(),
                                                   reduction="sum")

        pm = poptorch.trainingModel(Loss(), optimizer=poptorch.optim.SGD(m.parameters(),
                                                                         lr=0.1))
        out, _ = pm(given)
        pm.copyWeightsToHost()
        pm.destroy()
        results.append((out.clone(), [p.detach().clone() for p in m.parameters()]))
    assert torch.equal(results[0][0].half(), results[1][0])
    for p, q in zip(results[0][1], results[1][1]):
        assert torch.equal(p, q)
