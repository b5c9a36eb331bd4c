"""Every poptorch.optim optimizer trained through a real ipuofd against the same training on
the host: torch.optim's SGD, Adam, AdamW and RMSprop, and references written here from the
definitions for what torch has not (Adam/AdamW without bias correction, TensorFlow's
RMSprop, LAMB from You et al. 2019 as PopTorch defines it), each with parameter groups,
gradient clipping (torch.nn.utils.clip_grad_norm_) and bias correction on and off; the
optimizer state read back and loaded again.

Tolerance: weights after STEPS steps within rtol 1e-4, atol 1e-5 of the host's. Both sides
compute in float32, but the daemon sums the matrix products and the norms in another order
(and LAMB's norms in double), so the last bits differ and a few steps carry them on."""
import copy
import math

import pytest
import torch

import poptorch

STEPS = 6
RTOL, ATOL = 1e-4, 1e-5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 5)
        self.fc2 = torch.nn.Linear(5, 3)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.fc2(torch.tanh(self.fc1(x)))
        return out, self.loss(out, y)


def data():
    g = torch.Generator().manual_seed(3)
    return torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)


def groups_of(model, split, hyper):
    """model's parameters as one group, or two (fc1, fc2) with hyper for the second."""
    if not split:
        return model.parameters()
    return [{"params": model.fc1.parameters()}, dict(params=model.fc2.parameters(), **hyper)]


# ---- references written from the definitions -----------------------------------------

class RefAdamNoBias:
    """Adam/AdamW without bias correction: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
    p -= lr m / (sqrt(v) + eps); weight decay added to g (Adam) or p *= 1 - lr wd (AdamW)."""

    def __init__(self, groups, decoupled):
        self.groups, self.decoupled, self.m, self.v = groups, decoupled, {}, {}

    def step(self):
        for g in self.groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                d = p.grad.clone()
                m = self.m.setdefault(p, torch.zeros_like(p))
                v = self.v.setdefault(p, torch.zeros_like(p))
                with torch.no_grad():
                    if self.decoupled:
                        p.mul_(1 - g["lr"] * g["weight_decay"])
                    else:
                        d += g["weight_decay"] * p
                    m.mul_(b1).add_((1 - b1) * d)
                    v.mul_(b2).add_((1 - b2) * d * d)
                    p.sub_(g["lr"] * m / (v.sqrt() + g["eps"]))


class RefRMSpropTF:
    """TensorFlow's RMSprop (tf.raw_ops.ApplyRMSProp, ApplyCenteredRMSProp):
    ms = a ms + (1-a) g^2; [mg = a mg + (1-a) g]; mom = mu mom + lr g / sqrt(ms [- mg^2] + eps);
    p -= mom; the state starts at zero."""

    def __init__(self, groups):
        self.groups, self.s = groups, {}

    def step(self):
        for g in self.groups:
            for p in g["params"]:
                st = self.s.setdefault(p, [torch.zeros_like(p) for _ in range(3)])
                ms, mg, mom = st
                d = p.grad + g["weight_decay"] * p.detach()
                with torch.no_grad():
                    ms.mul_(g["alpha"]).add_((1 - g["alpha"]) * d * d)
                    var = ms
                    if g["centered"]:
                        mg.mul_(g["alpha"]).add_((1 - g["alpha"]) * d)
                        var = ms - mg * mg
                    mom.mul_(g["momentum"]).add_(g["lr"] * d / (var + g["eps"]).sqrt())
                    p.sub_(mom)


class RefLAMB:
    """LAMB, You et al. 2019 (algorithm 2) as PopTorch defines it: u = m^/(sqrt(v^)+eps) +
    wd w (m^ = m / (1 - b1^t), v^ = v / (1 - b2^t), or m, v without bias correction);
    w -= lr * phi(||w||) / ||u|| * u, phi(x) = min(x, max_weight_norm), ratio 1 if either
    norm is 0. Norms in double."""

    def __init__(self, groups, bias_correction, max_weight_norm):
        self.groups, self.bc, self.mwn, self.m, self.v, self.t = \
            groups, bias_correction, max_weight_norm, {}, {}, 0

    def step(self):
        self.t += 1
        for g in self.groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                d = p.grad
                m = self.m.setdefault(p, torch.zeros_like(p))
                v = self.v.setdefault(p, torch.zeros_like(p))
                with torch.no_grad():
                    m.mul_(b1).add_((1 - b1) * d)
                    v.mul_(b2).add_((1 - b2) * d * d)
                    c1 = 1 - b1 ** self.t if self.bc else 1.0
                    c2 = 1 - b2 ** self.t if self.bc else 1.0
                    u = (m / c1) / ((v / c2).sqrt() + g["eps"]) + g["weight_decay"] * p
                    r1 = p.double().norm().item()
                    if self.mwn is not None:
                        r1 = min(r1, self.mwn)
                    r2 = u.double().norm().item()
                    ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
                    p.sub_(g["lr"] * ratio * u)


def ref_groups(model, split, base, hyper):
    gs = [dict(base, params=list(model.fc1.parameters()) + ([] if split else
                                                            list(model.fc2.parameters())))]
    if split:
        gs.append(dict(base, **hyper, params=list(model.fc2.parameters())))
    return gs


# ---- the cases ---------------------------------------------------------------------------

def sgd(split, clip):
    hyper = {"lr": 0.2, "momentum": 0.5, "weight_decay": 0.01}
    kw = dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.02, loss_scaling=4.0,
              velocity_scaling=2.0)
    make = (lambda m: poptorch.optim.SGD(groups_of(m, split, hyper), max_grad_norm=clip,
                                         **kw))
    base = {k: v for k, v in kw.items() if k not in ("loss_scaling", "velocity_scaling")}
    ref = (lambda m: torch.optim.SGD(groups_of(m, split, hyper), **base))
    return make, ref


def adam(cls, split, clip, bias):
    hyper = {"lr": 0.05, "weight_decay": 0.1, "betas": (0.8, 0.99), "eps": 1e-6}
    kw = dict(lr=0.02, weight_decay=0.03, betas=(0.85, 0.995), eps=1e-7)
    poptorch_cls = {torch.optim.Adam: poptorch.optim.Adam,
                    torch.optim.AdamW: poptorch.optim.AdamW}[cls]
    make = (lambda m: poptorch_cls(groups_of(m, split, hyper), max_grad_norm=clip,
                                   bias_correction=bias, **kw))
    if bias:
        return make, (lambda m: cls(groups_of(m, split, hyper), **kw))
    return make, (lambda m: RefAdamNoBias(ref_groups(m, split, kw, hyper),
                                          cls is torch.optim.AdamW))


def rmsprop(split, clip, centered, tf):
    hyper = {"lr": 0.02, "alpha": 0.9, "momentum": 0.3, "eps": 1e-5}
    kw = dict(lr=0.01, alpha=0.95, eps=1e-6, weight_decay=0.01, momentum=0.5,
              centered=centered)
    make = (lambda m: poptorch.optim.RMSprop(groups_of(m, split, hyper), max_grad_norm=clip,
                                             use_tf_variant=tf, **kw))
    if tf:
        return make, (lambda m: RefRMSpropTF(ref_groups(m, split, kw, hyper)))
    return make, (lambda m: torch.optim.RMSprop(groups_of(m, split, hyper), **kw))


def lamb(split, clip, bias, mwn):
    hyper = {"lr": 0.03, "weight_decay": 0.0, "betas": (0.8, 0.99)}
    kw = dict(lr=0.01, weight_decay=0.05, betas=(0.9, 0.999), eps=1e-6)
    cls = poptorch.optim.LAMB if bias else poptorch.optim.LAMBNoBias
    make = (lambda m: cls(groups_of(m, split, hyper), max_grad_norm=clip, max_weight_norm=mwn,
                          **kw))
    ref = (lambda m: RefLAMB(ref_groups(m, split, dict(kw, max_weight_norm=mwn), hyper),
                             bias, mwn))
    return make, ref


CASES = {
    "SGD": lambda s, c: sgd(s, c),
    "Adam": lambda s, c: adam(torch.optim.Adam, s, c, True),
    "Adam-nobias": lambda s, c: adam(torch.optim.Adam, s, c, False),
    "AdamW": lambda s, c: adam(torch.optim.AdamW, s, c, True),
    "AdamW-nobias": lambda s, c: adam(torch.optim.AdamW, s, c, False),
    "RMSprop": lambda s, c: rmsprop(s, c, False, False),
    "RMSprop-centered": lambda s, c: rmsprop(s, c, True, False),
    "RMSprop-tf": lambda s, c: rmsprop(s, c, False, True),
    "RMSprop-tf-centered": lambda s, c: rmsprop(s, c, True, True),
    "LAMB": lambda s, c: lamb(s, c, True, None),
    "LAMB-maxnorm": lambda s, c: lamb(s, c, True, 0.8),
    "LAMBNoBias": lambda s, c: lamb(s, c, False, None),
}


def host_train(model, opt, x, y, clip):
    for _ in range(STEPS):
        for p in model.parameters():
            p.grad = None
        _, loss = model(x, y)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()


def compare(model, ref, rtol=RTOL, atol=ATOL):
    worst = 0.0
    for (name, a), (_, b) in zip(model.named_parameters(), ref.named_parameters()):
        worst = max(worst, (a.detach() - b.detach()).abs().max().item())
        assert torch.allclose(a.detach(), b.detach(), rtol=rtol, atol=atol), name
    print(f"max abs difference of the weights after {STEPS} steps: {worst:.3g}")
    return worst


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("split", [False, True], ids=["one-group", "two-groups"])
@pytest.mark.parametrize("clip", [None, 0.05], ids=["no-clip", "clip"])
def test_optimizer_matches_reference(daemon, case, split, clip):
    torch.manual_seed(0)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    start = copy.deepcopy(model)
    make, make_ref = CASES[case](split, clip)
    pm = poptorch.trainingModel(model, optimizer=make(model))
    for _ in range(STEPS):
        pm(x, y)
    host_train(ref, make_ref(ref), x, y, clip)
    compare(model, ref)
    # the update is not the identity: the weights moved
    assert not torch.allclose(model.fc1.weight, start.fc1.weight)
    pm.destroy()


@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW,
                                 torch.optim.RMSprop])
def test_torch_optimizers_map(daemon, cls):
    torch.manual_seed(0)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    kw = {"lr": 0.05, "momentum": 0.9} if cls in (torch.optim.SGD, torch.optim.RMSprop) \
        else {"lr": 0.01}
    pm = poptorch.trainingModel(model, optimizer=cls(model.parameters(), **kw))
    for _ in range(STEPS):
        pm(x, y)
    host_train(ref, cls(ref.parameters(), **kw), x, y, None)
    compare(model, ref)
    pm.destroy()


def test_host_step_matches_device(daemon):
    """poptorch.optim's step() on the host is the device's update (PopTorch's suite
    compares the two): LAMB and Adam without bias correction, with clipping."""
    for make in (lambda p: poptorch.optim.LAMB(p, lr=0.01, max_grad_norm=0.05),
                 lambda p: poptorch.optim.Adam(p, lr=0.01, bias_correction=False)):
        torch.manual_seed(0)
        x, y = data()
        model = Net()
        ref = copy.deepcopy(model)
        pm = poptorch.trainingModel(model, optimizer=make(model.parameters()))
        opt = make(ref.parameters())
        for _ in range(STEPS):
            pm(x, y)
            opt.zero_grad()
            ref(x, y)[1].backward()
            opt.step()
        compare(model, ref)
        pm.destroy()


def test_set_optimizer_changes_a_group_without_recompiling(daemon):
    torch.manual_seed(0)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    opt = poptorch.optim.SGD(groups_of(model, True, {"lr": 0.2}), lr=0.1, momentum=0.9)
    ropt = torch.optim.SGD(groups_of(ref, True, {"lr": 0.2}), lr=0.1, momentum=0.9)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm(x, y)
    host_train_steps = 1
    exe = pm._exe
    for lr in (0.0, 0.05):
        opt.param_groups[1]["lr"] = lr
        ropt.param_groups[1]["lr"] = lr
        pm.setOptimizer(opt)
        pm(x, y)
        host_train_steps += 1
    assert pm._exe is exe, "setOptimizer must not recompile"
    for i in range(host_train_steps):
        ropt.param_groups[1]["lr"] = (0.2, 0.0, 0.05)[i]
        ropt.zero_grad()
        ref(x, y)[1].backward()
        ropt.step()
    compare(model, ref)
    pm.destroy()


def test_momentum_given_is_variable(daemon):
    """PopTorch plans SGD's velocity when momentum is variable (given, even as 0, or marked
    variable), so setOptimizer may raise it; a momentum left constant at 0 cannot."""
    torch.manual_seed(0)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    opt = poptorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.0)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.0)
    pm = poptorch.trainingModel(model, optimizer=opt)
    for momentum in (0.0, 0.9, 0.9):
        for o in (opt, ropt):
            o.param_groups[0]["momentum"] = momentum
        pm.setOptimizer(opt)
        pm(x, y)
        ropt.zero_grad()
        ref(x, y)[1].backward()
        ropt.step()
    assert "Accl___fc1.weight" in opt.state_dict()["ipu_state"]
    compare(model, ref)
    pm.destroy()

    model = Net()
    opt = poptorch.optim.SGD(model.parameters(), lr=0.1)   # momentum constant
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm(x, y)
    opt.param_groups[0]["momentum"] = 0.9
    with pytest.raises(poptorch.Error, match="compiled without momentum"):
        pm.setOptimizer(opt)
    pm.destroy()


@pytest.mark.parametrize("case", ["SGD", "Adam", "RMSprop-centered", "LAMB"])
def test_state_dict_reads_and_resumes(daemon, case):
    """state_dict() after training is the device's state (as the reference optimizer's);
    a new model loading weights and state goes on exactly as the first one would."""
    torch.manual_seed(0)
    x, y = data()
    model = Net()
    straight = copy.deepcopy(model)
    make, _ = CASES[case](False, None)
    opt = make(model)
    pm = poptorch.trainingModel(model, optimizer=opt)
    for _ in range(STEPS // 2):
        pm(x, y)
    sd = opt.state_dict()
    assert sd["ipu_state"], "the device's state tensors"
    slots = {"SGD": {"momentum_buffer"}, "Adam": {"exp_avg", "exp_avg_sq", "step"},
             "RMSprop-centered": {"square_avg", "grad_avg", "momentum_buffer", "step"},
             "LAMB": {"exp_avg", "exp_avg_sq", "step"}}[case]
    assert set(sd["state"][0]) == slots
    if "step" in slots:
        assert int(sd["state"][0]["step"]) == STEPS // 2
    weights = copy.deepcopy(model.state_dict())
    saved = copy.deepcopy(sd)

    # the reference optimizer's state after the same steps
    ref = copy.deepcopy(straight)
    ropt = make(ref)
    for _ in range(STEPS // 2):
        ropt.zero_grad()
        ref(x, y)[1].backward()
        ropt.step()
    for slot in slots - {"step"}:
        dev = sd["state"][0][slot]
        host = ropt.state[next(iter(ref.parameters()))][slot]
        assert torch.allclose(dev, host, rtol=RTOL, atol=ATOL), slot

    # resume: a fresh model, its weights and the saved state, the other half of the steps
    resumed = Net()
    resumed.load_state_dict(weights)
    ropt2 = make(resumed)
    pm2 = poptorch.trainingModel(resumed, optimizer=ropt2)
    ropt2.load_state_dict(saved)
    for _ in range(STEPS - STEPS // 2):
        pm(x, y)
        pm2(x, y)
    for (n, a), (_, b) in zip(model.named_parameters(), resumed.named_parameters()):
        assert torch.equal(a.detach(), b.detach()), n   # the same arithmetic: identical
    pm.destroy()
    pm2.destroy()


def test_state_errors(daemon):
    x, y = data()
    model = Net()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.01)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm(x, y)
    sd = opt.state_dict()
    bad = copy.deepcopy(sd)
    key = next(k for k in bad["ipu_state"] if k.startswith("Accl1___"))
    bad["ipu_state"][key] = torch.zeros(7)
    with pytest.raises(poptorch.Error, match=r"has shape \[7\]; the weight is"):
        opt.load_state_dict(bad)
    # a CPU torch state dict is not an IPU one (PopTorch's error)
    cpu = torch.optim.Adam(Net().parameters())
    with pytest.raises(RuntimeError, match="Only IPU optimizer states"):
        opt.load_state_dict(cpu.state_dict() | {"state": {0: {"step": torch.tensor(1.)}}})
    pm.destroy()


def _half(t, scale=1.0):
    """t as a float16 buffer holding t * scale keeps it."""
    return (t * scale).half().float() / scale


# A float32 difference in the last bit of a gradient (the daemon sums in another order) can
# round a float16 state to the neighbouring value: 2^-11 relative, more in float16's
# subnormals, where Adam's v of small gradients lives; an update moves by lr times that.
HALF_RTOL, HALF_ATOL = 1e-3, 2e-4


@pytest.mark.parametrize("case", ["SGD", "Adam", "RMSprop-centered"])
def test_float16_accumulators_are_float16(daemon, case):
    """accum_type / velocity_accum_type / first_ and second_order_momentum_accum_type =
    torch.float16: the device keeps that state rounded to float16 (scaled as the IPU stores
    it: the gradient by loss_scaling, SGD's velocity by velocity_scaling = loss_scaling in
    PopTorch's separate variant), checked against torch's optimizer whose state and
    gradients are rounded the same way after each step. Tolerance HALF_RTOL, HALF_ATOL; the
    state read back is exactly float16-representable (after the scaling), which float32
    state is not."""
    torch.manual_seed(0)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    half = torch.float16
    if case == "SGD":
        ls = 8.0
        opt = poptorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                                 loss_scaling=ls, accum_type=half, velocity_accum_type=half)
        ropt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
        slots = {"momentum_buffer": ls}
    elif case == "Adam":
        ls = 1.0
        opt = poptorch.optim.Adam(model.parameters(), lr=0.01, accum_type=half,
                                  first_order_momentum_accum_type=half,
                                  second_order_momentum_accum_type=half)
        ropt = torch.optim.Adam(ref.parameters(), lr=0.01)
        slots = {"exp_avg": 1.0, "exp_avg_sq": 1.0}
    else:
        ls = 1.0
        opt = poptorch.optim.RMSprop(model.parameters(), lr=0.01, centered=True,
                                     first_order_momentum_accum_type=half,
                                     second_order_momentum_accum_type=half)
        ropt = torch.optim.RMSprop(ref.parameters(), lr=0.01, centered=True)
        slots = {"square_avg": 1.0, "grad_avg": 1.0}
    pm = poptorch.trainingModel(model, optimizer=opt)
    for _ in range(STEPS):
        pm(x, y)
    for _ in range(STEPS):
        for p in ref.parameters():
            p.grad = None
        _, loss = ref(x, y)
        loss.backward()
        if getattr(opt, "accum_type", None) == half:
            for p in ref.parameters():
                p.grad = _half(p.grad, ls)
        ropt.step()
        with torch.no_grad():
            for st in ropt.state.values():
                for k, sc in slots.items():
                    st[k].copy_(_half(st[k], sc))
    compare(model, ref, HALF_RTOL, HALF_ATOL)
    sd = opt.state_dict()
    for st in sd["state"].values():
        for k, sc in slots.items():
            assert torch.equal(st[k], _half(st[k], sc)), k
    pm.destroy()
    # float32 state keeps bits float16 has not
    model32 = copy.deepcopy(ref)
    kw = dict(lr=0.01, momentum=0.9) if case == "SGD" else dict(lr=0.01)
    cls = {"SGD": poptorch.optim.SGD, "Adam": poptorch.optim.Adam,
           "RMSprop-centered": poptorch.optim.RMSprop}[case]
    if case == "RMSprop-centered":
        kw["centered"] = True
    opt32 = cls(model32.parameters(), **kw)
    pm32 = poptorch.trainingModel(model32, optimizer=opt32)
    pm32(x, y)
    sd32 = opt32.state_dict()
    k = next(iter(slots))
    assert any(not torch.equal(st[k], _half(st[k], slots[k])) for st in sd32["state"].values())
    pm32.destroy()


def test_rmsprop_alpha_above_one_as_torch(daemon):
    """torch.optim.RMSprop takes any alpha >= 0 (PopTorch's suite sets 1.49): the device
    takes it too and computes what torch computes, NaN where torch's is NaN."""
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    pm = poptorch.trainingModel(model, optimizer=poptorch.optim.RMSprop(
        model.parameters(), lr=0.01, alpha=1.05))
    pm(x, y)
    pm(x, y)
    host_train_steps = torch.optim.RMSprop(ref.parameters(), lr=0.01, alpha=1.05)
    for _ in range(2):
        for p in ref.parameters():
            p.grad = None
        ref(x, y)[1].backward()
        host_train_steps.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(a.detach(), b.detach(), rtol=RTOL, atol=ATOL, equal_nan=True)
    assert any(torch.isnan(p).any() for p in ref.parameters())   # torch's NaN is there
    pm.destroy()
    with pytest.raises(poptorch.Error, match="alpha"):
        bad = Net()
        opt = torch.optim.RMSprop(bad.parameters(), lr=0.01)
        opt.param_groups[0]["alpha"] = -0.5   # torch's constructor would refuse it
        poptorch.trainingModel(bad, optimizer=opt)(x, y)


def test_accumulator_type_checked(daemon):
    model = Net()
    with pytest.raises(ValueError, match="float32 or torch.float16"):
        poptorch.optim.Adam(model.parameters(), accum_type=torch.int32)


def test_bad_arguments_are_refused(daemon):
    model = Net()
    with pytest.raises(ValueError, match="max_grad_norm"):
        poptorch.optim.SGD(model.parameters(), lr=0.1, max_grad_norm=-1.0)
    with pytest.raises(ValueError, match="loss_scaling"):
        poptorch.optim.Adam(model.parameters(), loss_scaling=0.0)


def test_compile_sets_the_optimizer_through_the_handle(daemon):
    """A training compile sets the optimizer on the library's options handle one
    hyper-parameter at a time (ipuof_compile_opts_set_optimizer_param): a value torch's
    constructor lets through but the library refuses (Adam's eps 0, torch checks eps >= 0)
    is refused by the library before anything reaches the daemon, naming the parameter and
    its range; a second group's values are its own."""
    x, y = data()
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=0.01, eps=0.0)
    with pytest.raises(poptorch.Error,
                       match=r"refused by libipuof-client \(IPUOF_E_INVAL\): optimizer eps 0 "
                             r"is out of range: it must be > 0"):
        poptorch.trainingModel(model, optimizer=opt)(x, y)
    model = Net()
    opt = torch.optim.Adam([{"params": model.fc1.parameters()},
                            {"params": model.fc2.parameters(), "betas": (0.5, 1.0)}], lr=0.01)
    with pytest.raises(poptorch.Error, match=r"optimizer beta2 1 is out of range"):
        poptorch.trainingModel(model, optimizer=opt)(x, y)
