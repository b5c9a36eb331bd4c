"""Training models whose loss reaches no trainable weight, against a real ipuofd.

PopTorch builds PopART's TrainingSession for them all the same (popart_compiler
Compiler.cpp: a trainingModel always makes a TrainingSession); its backward pass is then
empty: the forward pass runs, the outputs and the loss are PyTorch's, and no weight
changes. The daemon used to refuse such a graph ("no trainable weights"). Cases from
PopTorch's own suite: a Dropout or a BatchNorm in eval() inside a training model, a loss of
the input alone next to an unused Linear, a BatchNorm in eval() with frozen parameters.
A BatchNorm in eval() inside a training model uses and keeps its running statistics (the
export's training_mode 0), trainable or not, as torch does."""
import copy

import pytest
import torch
import torch.nn as nn

import poptorch


def check(a, b, rtol=1e-5, atol=1e-6):
    diff = (a - b).abs().max().item() if a.numel() else 0.0
    print(f"max abs difference {diff:.3g}")
    assert torch.allclose(a, b, rtol=rtol, atol=atol), diff


def params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def weights_unchanged(pm, model, before):
    """Copy pm's weights to model, check each is the one it had before, destroy pm."""
    pm.copyWeightsToHost()
    for k, v in params(model).items():
        assert torch.equal(v, before[k]), k
    pm.destroy()


def run_as_reference(pm, ref, *args):
    """One call of pm and of the PyTorch reference ref on args: outputs and loss alike."""
    out, loss = pm(*args)
    ref_out, ref_loss = ref(*args)
    check(out, ref_out)
    check(loss, ref_loss)
    return out


def test_loss_of_input_only(daemon):
    """tensor_ops_test.py test_repeat_training_input: the Linear is not used."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 1)

        def forward(self, x):
            x = x.repeat(5, 2, 2)
            return x, poptorch.identity_loss(x ** 2, reduction="sum")

    torch.manual_seed(42)
    x = torch.randn(10, 1, 1)
    model = Model()
    before = params(model)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    for _ in range(3):
        out, loss = pm(x)
        check(out, x.repeat(5, 2, 2))
        check(loss, (x.repeat(5, 2, 2) ** 2).sum(), rtol=1e-5)
    weights_unchanged(pm, model, before)


@pytest.mark.parametrize("layer", [nn.Dropout, nn.Dropout2d, nn.AlphaDropout])
def test_eval_layer_in_training_model(daemon, layer):
    """misc_nn_layers_test.py test_dropout_eval_during_training: the dropout in eval()
    inside a training model is the identity (trainingModel keeps the submodule's eval()
    flag, as PopTorch traces the model as it is), and there is nothing to train."""
    torch.manual_seed(0)
    net = layer(0.5)
    x = torch.randn(4, 6, 3)
    net.eval()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net
            self.loss = nn.L1Loss()

        def forward(self, x, target):
            out = self.net(x)
            return out, self.loss(out, target)

    target = torch.zeros(4, 6, 3)
    model = Model()
    ref = copy.deepcopy(model)
    before = params(model)
    pm = poptorch.trainingModel(model)
    out = run_as_reference(pm, ref, x, target)
    assert torch.equal(out, x)
    weights_unchanged(pm, model, before)
    assert not net.training  # the capture put the flags back as they were


def test_frozen_weights_only(daemon):
    """Every parameter with requires_grad False: the same empty backward pass."""
    torch.manual_seed(1)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x, y):
            out = self.fc(x)
            return out, nn.functional.mse_loss(out, y)

    model = Model()
    for p in model.parameters():
        p.requires_grad_(False)
    ref = copy.deepcopy(model)
    before = params(model)
    x, y = torch.randn(5, 3), torch.randn(5, 2)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    run_as_reference(pm, ref, x, y)
    weights_unchanged(pm, model, before)


def test_batchnorm_eval_in_training_model(daemon):
    """norms_test.py test_batchNorm_eval_during_training: the running statistics, not the
    batch's, and left as they were."""
    torch.manual_seed(42)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(100)
            self.loss = nn.MSELoss()

        def forward(self, x, target):
            y = self.bn(x)
            return y, self.loss(y, target)

    x, target = torch.randn(16, 100), torch.randn(16, 100)
    model = Model()
    for p in model.parameters():
        p.requires_grad = False
    with torch.no_grad():       # statistics that differ from the batch's
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    model.bn.eval()
    ref = copy.deepcopy(model)
    before = params(model)
    pm = poptorch.trainingModel(model)
    run_as_reference(pm, ref, x, target)
    weights_unchanged(pm, model, before)


def test_trainable_batchnorm_eval_in_training_model(daemon):
    """A BatchNorm in eval() whose scale and bias train (fine-tuning with frozen statistics):
    three SGD steps against torch's, outputs, loss and every weight; the running statistics
    do not move."""
    torch.manual_seed(3)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4 * 4 * 4, 5)

        def forward(self, x, y):
            out = self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))
            return out, nn.functional.cross_entropy(out, y)

    model = Model()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2)
    model.bn.eval()
    ref = copy.deepcopy(model)
    stats = {k: v.clone() for k, v in model.state_dict().items() if "running" in k}
    x, y = torch.randn(6, 3, 6, 6), torch.randint(0, 5, (6,))
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        out, loss = pm(x, y)
        opt.zero_grad()
        ref_out, ref_loss = ref(x, y)
        ref_loss.backward()
        opt.step()
        check(out, ref_out, rtol=1e-4, atol=1e-5)
        check(loss, ref_loss, rtol=1e-4, atol=1e-5)
    pm.copyWeightsToHost()
    for k, v in ref.state_dict().items():
        if "running" in k:
            assert torch.equal(model.state_dict()[k], stats[k]), k
        elif v.is_floating_point():
            check(model.state_dict()[k], v, rtol=1e-4, atol=1e-5)
    pm.destroy()
