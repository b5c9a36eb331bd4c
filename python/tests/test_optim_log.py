"""PopTorch's optimizer log lines, written by the package for what it sends the daemon:
"Updating graph optimizer with ..." / "Updating group N optimizer with ..." (DEBUG, only
when the optimizer changed), "Ignoring unexpected ... attribute" (WARN, once), the
subclassing warning, and the state transfers ("Writing optimiser state tensors ...",
"Using cached optimiser state dict")."""
import pytest
import torch

import poptorch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.fc(x)
        return out, self.loss(out, y)


X, Y = torch.ones(2, 4), torch.tensor([0, 2])


@pytest.fixture
def debug_log():
    poptorch.setLogLevel("DEBUG")
    yield
    poptorch.setLogLevel("WARN")


def lines(capsys, *words):
    err = capsys.readouterr().err
    return [ln for ln in err.splitlines() if all(w in ln for w in words)]


def test_graph_and_group_lines_describe_what_is_sent(daemon, debug_log, capsys):
    model = Net()
    opt = poptorch.optim.SGD(model.parameters(), lr=0.01, loss_scaling=2.0,
                             accum_type=torch.float16)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm(X, Y)
    err = capsys.readouterr().err
    graph = [ln for ln in err.splitlines() if "Updating graph optimizer with SGD" in ln]
    assert len(graph) == 1, err
    for w in ("defaultLearningRate=0.01,", "defaultVelocityScaling=2,", "lossScaling=2,",
              "defaultMomentum=0 (const)", "accumType=float16",
              "firstOrderMomentumAccumType=float32", "maxGradNorm=inf"):
        assert w in graph[0], (w, graph[0])
    assert "defaultLearningRate=0.01 (const)" not in graph[0]
    group = [ln for ln in err.splitlines() if "Updating group 0 optimizer with SGD" in ln]
    assert len(group) == 1 and "tensors affected [fc.weight, fc.bias]" in group[0], err
    # the same optimizer again: nothing is sent, nothing logged
    pm.setOptimizer(opt)
    pm(X, Y)
    assert not lines(capsys, "optimizer with")
    # a new learning rate is
    opt.param_groups[0]["lr"] = 0.5
    pm.setOptimizer(opt)
    assert lines(capsys, "Updating group 0 optimizer with SGD", "learningRate=0.5,")
    pm.destroy()


def test_torch_optimizer_constants_follow_poptorch_rule(daemon, debug_log, capsys):
    model = Net()
    pm = poptorch.trainingModel(model, optimizer=torch.optim.Adam(model.parameters(),
                                                                  lr=0.1))
    pm(X, Y)
    (ln,) = lines(capsys, "Updating graph optimizer with ADAM")
    for w in ("defaultBeta1=0.9 (const)", "defaultBeta2=0.999 (const)",
              "defaultEps=1e-08 (const)", "defaultWeightDecay=0 (const)"):
        assert w in ln, (w, ln)
    assert "defaultLearningRate=0.1," in ln
    pm.destroy()


def test_unexpected_attributes_warned_once(daemon, capsys):
    model = Net()
    opt = poptorch.optim.SGD(model.parameters(), lr=0.01)
    opt.extra_before = 1   # there at the first compile: expected
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm(X, Y)
    assert not lines(capsys, "unexpected")
    opt.lr = 0.5
    opt.param_groups[0]["initial_lr"] = 0.1
    opt.loss_scaling = 3.0
    pm.setOptimizer(opt)
    err = capsys.readouterr().err
    assert "Ignoring unexpected optimizer attribute in SGD optimizer: ['lr']" in err, err
    assert "Ignoring unexpected group 0 attribute in SGD optimizer: ['initial_lr']" in err
    opt.loss_scaling = 4.0
    pm.setOptimizer(opt)
    assert not lines(capsys, "unexpected")
    pm.destroy()


def test_subclassed_optimizer_warned(daemon, capsys):
    class Mine(poptorch.optim.Adam):
        pass

    model = Net()
    pm = poptorch.trainingModel(model, optimizer=Mine(model.parameters(), lr=0.01))
    pm(X, Y)
    assert lines(capsys, "Poptorch does not run Python optimizer code directly")
    pm.destroy()
    model = Net()
    pm = poptorch.trainingModel(model, optimizer=poptorch.optim.Adam(model.parameters()))
    pm(X, Y)
    assert not lines(capsys, "Poptorch does not run Python optimizer code directly")
    pm.destroy()


def test_state_transfers_logged_and_cached(daemon, debug_log, capsys):
    model = Net()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.01)
    pm = poptorch.trainingModel(model, optimizer=opt)
    pm(X, Y)
    capsys.readouterr()
    s0 = opt.state_dict()
    assert lines(capsys, "Writing optimiser state tensors from IPU to host.")
    s1 = opt.state_dict()
    err = capsys.readouterr().err
    assert "Using cached optimiser state dict" in err and "Writing" not in err, err
    assert s0["ipu_state"].keys() == s1["ipu_state"].keys()
    pm(X, Y)   # a run changes the state: read again
    opt.state_dict()
    assert lines(capsys, "Writing optimiser state tensors from IPU to host.")
    opt.load_state_dict(s0)
    assert lines(capsys, "Writing optimiser state tensors from host to IPU memory.")
    s2 = opt.state_dict()   # the write changed it: read again, and it is s0's
    for k, v in s0["ipu_state"].items():
        assert torch.equal(s2["ipu_state"][k], v), k
    pm.destroy()


def test_compile_logs_the_options_it_reads(daemon, debug_log, capsys):
    """A compile logs its options as PopTorch's backend does when it reads them
    (options_test.py test_override_options_from_file); none at the WARN level."""
    opts = poptorch.Options().deviceIterations(3)
    pm = poptorch.inferenceModel(torch.nn.Linear(4, 3), opts)
    pm(torch.ones(3, 4))
    pm(torch.ones(3, 4))
    err = capsys.readouterr().err
    assert err.count("[DEBUG] poptorch.Options set device_iterations to value 3") == 1, err
    pm.destroy()
    poptorch.setLogLevel("WARN")
    pm = poptorch.inferenceModel(torch.nn.Linear(4, 3), opts)
    pm(torch.ones(3, 4))
    assert lines(capsys, "poptorch.Options set") == []
    pm.destroy()
