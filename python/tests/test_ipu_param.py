"""optimizer.load_state_dict() with PopTorch's "ipu_param" view: the hyper-parameters it
holds become the device's (the keys left out keep theirs), state_dict() gives them back,
and the next steps equal torch's optimizer with those hyper-parameters (issue 19)."""
import copy

import pytest
import torch

import poptorch

RTOL, ATOL = 1e-5, 1e-6


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 3)
        self.fc2 = torch.nn.Linear(3, 2)

    def forward(self, x, y):
        out = self.fc2(torch.tanh(self.fc1(x)))
        return out, torch.nn.functional.mse_loss(out, y)


def data():
    g = torch.Generator().manual_seed(5)
    return torch.randn(6, 4, generator=g), torch.randn(6, 2, generator=g)


def torch_steps(model, groups, cls, x, y, n, **kw):
    """n steps of torch's optimizer cls over model with groups {param names: hyper}."""
    params = dict(model.named_parameters())
    opt = cls([dict(params=[params[n] for n in names], **h) for names, h in groups], **kw)
    for _ in range(n):
        opt.zero_grad()
        model(x, y)[1].backward()
        opt.step()


def close(model, ref):
    worst = 0.0
    for (n, a), (_, b) in zip(model.named_parameters(), ref.named_parameters()):
        worst = max(worst, float((a.detach() - b.detach()).abs().max()))
        assert torch.allclose(a.detach(), b.detach(), rtol=RTOL, atol=ATOL), n
    print(f"max |ipuofd - torch| = {worst:.3g}")


def test_sgd_loaded_learning_rate_is_used(daemon):
    """SGD's PopART tensors (scaledLearningRate0 = lr / lossScaling, weightDecayScaleFactor0
    = 1 - lr wd) for one weight: the step equals torch's SGD with that weight's lr 0.5 and
    wd 0.1; the others keep lr 0.05 (their keys left out of the dict)."""
    torch.manual_seed(0)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    opt = poptorch.optim.SGD(model.parameters(), lr=0.05, loss_scaling=4.0)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm.compile(x, y)
    sd = opt.state_dict()
    ipu_param = sd["ipu_param"]
    assert float(ipu_param["scaledLearningRate0___specific___fc1.weight"]) == \
        pytest.approx(0.05 / 4.0)
    ipu_param = {"scaledLearningRate0___specific___fc1.weight": torch.tensor(0.5 / 4.0),
                 "weightDecayScaleFactor0___specific___fc1.weight":
                     torch.tensor(1 - 0.5 * 0.1)}
    sd["ipu_param"] = ipu_param
    opt.load_state_dict(sd)
    # until the next run, what was loaded (PopTorch: the keys left out are not there yet)
    assert set(opt.state_dict()["ipu_param"]) == set(ipu_param)
    for _ in range(3):
        pm(x, y)
    rest = [n for n, _ in model.named_parameters() if n != "fc1.weight"]
    torch_steps(ref, [(["fc1.weight"], dict(lr=0.5, weight_decay=0.1)),
                      (rest, dict(lr=0.05))], torch.optim.SGD, x, y, 3)
    close(model, ref)
    after = opt.state_dict()["ipu_param"]
    for k, v in ipu_param.items():
        assert torch.equal(after[k], v), k
    assert float(after["scaledLearningRate0___specific___fc2.weight"]) == \
        pytest.approx(0.05 / 4.0)
    pm.destroy()


@pytest.mark.parametrize("cls", [poptorch.optim.Adam, poptorch.optim.AdamW,
                                 poptorch.optim.RMSprop])
def test_loaded_learning_rate_is_used(daemon, cls):
    """learningRate / weightDecay of every weight loaded: the steps equal torch's optimizer
    with lr 0.5 (weight decay 0.02); a later change of param_groups wins again."""
    torch.manual_seed(1)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    opt = cls(model.parameters(), lr=0.001, weight_decay=0.0)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm.compile(x, y)
    sd = opt.state_dict()
    for k in sd["ipu_param"]:
        if k.startswith("learningRate___"):
            sd["ipu_param"][k] = torch.tensor(0.5)
        elif k.startswith("weightDecay___"):
            sd["ipu_param"][k] = torch.tensor(0.02)
    opt.load_state_dict(sd)
    pm(x, y)
    pm(x, y)
    names = [n for n, _ in model.named_parameters()]
    base = getattr(torch.optim, cls.__name__)
    steps_ref = copy.deepcopy(ref)
    torch_steps(steps_ref, [(names, dict(lr=0.5, weight_decay=0.02))], base, x, y, 2)
    close(model, steps_ref)
    assert float(opt.state_dict()["ipu_param"]["learningRate___specific___fc1.bias"]) == 0.5
    # param_groups changed afterwards: theirs win (as PopTorch's setOptimizer)
    opt.param_groups[0]["lr"] = 0.25
    pm(x, y)
    assert float(opt.state_dict()["ipu_param"]["learningRate___specific___fc1.bias"]) == 0.25
    pm.destroy()


def test_loaded_values_the_device_cannot_take(daemon):
    x, y = data()
    model = Net()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.01)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm.compile(x, y)
    sd = opt.state_dict()
    sd["ipu_param"]["learningRate___specific___fc1.weight"] = torch.tensor(-0.3)
    with pytest.raises(poptorch.Error, match=r"learning rate -0\.3 .*>= 0 and finite"):
        opt.load_state_dict(sd)
    sd["ipu_param"] = {"learningRate___specific___fc1.weight": torch.zeros(2)}
    with pytest.raises(poptorch.Error, match=r"has shape \[2\]; a hyper-parameter is one"):
        opt.load_state_dict(sd)
    sd["ipu_param"] = {"learningRate___specific___nosuch.weight": torch.tensor(0.1)}
    with pytest.raises(poptorch.Error, match=r"nosuch\.weight, which name no hyper-param"):
        opt.load_state_dict(sd)
    # the model still trains with its own hyper-parameters
    pm(x, y)
    assert float(opt.state_dict()["ipu_param"]["learningRate___specific___fc1.weight"]) \
        == pytest.approx(0.01)
    pm.destroy()


def test_rmsprop_planned_buffer_holds_the_step(daemon):
    """RMSprop with momentum given as 0 (variable: the buffer is planned, PopTorch's
    Accl3___W): after a step it holds the step's g / (sqrt(v) + eps), as PopART's velocity
    with momentum 0 does, and the weights equal torch's RMSprop (which keeps no buffer)."""
    torch.manual_seed(2)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    opt = poptorch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.0)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm(x, y)
    ropt = torch.optim.RMSprop(ref.parameters(), lr=0.01)
    ropt.zero_grad()
    ref(x, y)[1].backward()
    grads = {n: p.grad.clone() for n, p in ref.named_parameters()}
    ropt.step()
    close(model, ref)
    ipu_state = opt.state_dict()["ipu_state"]
    for n, g in grads.items():
        want = g / ((0.01 * g * g).sqrt() + 1e-8)        # alpha 0.99: v = 0.01 g^2
        assert torch.allclose(ipu_state["Accl3___" + n], want, rtol=RTOL, atol=ATOL), n
    pm.destroy()


def _strategy_model(accum_type):
    opts = poptorch.Options()
    opts.Training.setMeanAccumulationAndReplicationReductionStrategy(
        poptorch.MeanReductionStrategy.Post)
    model = Net()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.5, accum_type=accum_type)
    return opt, poptorch.trainingModel(model, opts, optimizer=opt)


def test_float16_accum_type_takes_running_over_a_strategy_set(daemon):
    """PopTorch's trainingModel takes the Running mean for a float16 accum_type even when
    Post was set; a float32 one keeps what was set."""
    x, y = data()
    opt, pm = _strategy_model(torch.float16)
    pm.compile(x, y)
    assert pm.options.Training.meanAccumulationAndReplicationReductionStrategy == \
        poptorch.MeanReductionStrategy.Running
    opt.param_groups[0]["lr"] = 0.01
    pm.setOptimizer(opt)           # same accumulators: fine
    pm.destroy()


def test_set_optimizer_refuses_a_float16_accum_type_after_compile(daemon):
    x, y = data()
    opt, pm = _strategy_model(torch.float32)
    pm.compile(x, y)
    assert pm.options.Training.meanAccumulationAndReplicationReductionStrategy == \
        poptorch.MeanReductionStrategy.Post
    opt.accum_type = torch.half
    with pytest.raises(ValueError, match="needs the Running mean reduction strategy, and "
                       "the model is already compiled with Post"):
        pm.setOptimizer(opt)
    pm.destroy()


def test_loaded_before_the_compile_applies_at_the_compile(daemon):
    """ipu_param loaded into an optimizer whose model is not compiled yet: the compile
    takes the values (a value the device refuses is an Error there)."""
    torch.manual_seed(3)
    x, y = data()
    model = Net()
    ref = copy.deepcopy(model)
    opt = poptorch.optim.Adam(model.parameters(), lr=0.001)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm.compile(x, y)
    sd = copy.deepcopy(opt.state_dict())
    pm.destroy()
    for k in sd["ipu_param"]:
        if k.startswith("learningRate___"):
            sd["ipu_param"][k] = torch.tensor(0.5)
    opt2 = poptorch.optim.Adam(model.parameters(), lr=0.001)
    opt2.load_state_dict(sd)
    pm2 = poptorch.trainingModel(model, optimizer=opt2)
    pm2(x, y)
    names = [n for n, _ in model.named_parameters()]
    torch_steps(ref, [(names, dict(lr=0.5))], torch.optim.Adam, x, y, 1)
    close(model, ref)
    pm2.destroy()
    sd["ipu_param"]["learningRate___specific___fc1.bias"] = torch.tensor(float("inf"))
    opt3 = poptorch.optim.Adam(model.parameters(), lr=0.001)
    opt3.load_state_dict(sd)
    pm3 = poptorch.trainingModel(model, optimizer=opt3)
    with pytest.raises(poptorch.Error, match="learning rate inf"):
        pm3(x, y)
    pm3.destroy()
