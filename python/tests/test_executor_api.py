"""The executor's public API beyond calling it: tensor names and anchored tensors, the
simulated clock's perf counters, latencies and cycle count, copyNamedBuffersToDevice,
module_repr, rng_state, _executable, and ipuHardwareIsAvailable."""
import os
import socket

import pytest
import torch
import torch.nn as nn

import poptorch


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 3)
        self.loss = nn.MSELoss()

    def forward(self, x, labels=None):
        out = self.fc2(torch.relu(self.fc1(x)))
        if self.training:
            return out, self.loss(out, labels)
        return out


def test_tensor_names_and_anchors(daemon):
    x, y = torch.rand(2, 4), torch.rand(2, 3)
    model = Net()
    probe = poptorch.trainingModel(Net())
    with pytest.raises(AssertionError):
        probe.getTensorNames()
    probe.compile(x, y)
    names = probe.getTensorNames()
    probe.destroy()
    assert {"x", "labels", "fc1.weight", "fc2.bias"} <= set(names), names
    assert "UpdatedVar___fc2.weight" in names and "UpdatedVar___fc1.bias" in names
    relu = [n for n in names if "Relu" in n]
    assert relu, names

    opts = poptorch.Options()
    opts.anchorTensor("act", relu[0])
    opts.anchorTensor("w", "UpdatedVar___fc2.weight")
    pm = poptorch.trainingModel(model, opts,
                                optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    w0 = model.fc2.weight.detach().clone()
    with torch.no_grad():
        act = torch.relu(model.fc1(x))
    pm(x, y)
    torch.testing.assert_close(pm.getAnchoredTensor("act"), act, rtol=1e-5, atol=1e-6)
    w1 = pm.getAnchoredTensor("w")
    assert w1.shape == (3, 4) and not torch.equal(w1, w0)
    torch.testing.assert_close(w1, model.fc2.weight.detach())  # the device's, after step 1
    with pytest.raises(poptorch.Error, match="no tensor is anchored as 'nope'"):
        pm.getAnchoredTensor("nope")
    pm.destroy()


def test_gradient_anchors(daemon):
    """Gradient___<weight> (PopTorch's observing_tensors tutorial): the gradient of each
    run's update, read from the device, equal to torch's .grad of the same step; listed by
    getTensorNames()."""
    x, y = torch.rand(2, 4), torch.rand(2, 3)
    model = Net()
    ref = Net()
    opts = poptorch.Options()
    opts.anchorTensor("gw", "Gradient___fc1.weight")
    opts.anchorTensor("gb", "Gradient___fc2.bias")
    pm = poptorch.trainingModel(model, opts,
                                optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(2):
        xs, ys = x + step, y * (step + 1)
        opt.zero_grad()
        ref(xs, ys)[1].backward()
        opt.step()
        pm(xs, ys)
        gw, gb = pm.getAnchoredTensor("gw"), pm.getAnchoredTensor("gb")
        assert gw.shape == (4, 4) and gb.shape == (3,)
        assert gb.abs().sum() > 0
        torch.testing.assert_close(gw, ref.fc1.weight.grad, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(gb, ref.fc2.bias.grad, rtol=1e-5, atol=1e-6)
    names = pm.getTensorNames()
    assert "Gradient___fc1.weight" in names and "Gradient___fc2.bias" in names
    pm.destroy()


def test_anchor_refusals(daemon):
    x, y = torch.rand(2, 4), torch.rand(2, 3)
    opts = poptorch.Options()
    opts.anchorTensor("g", "Gradient___fc2.bias")
    with pytest.raises(poptorch.Error, match="an inference model has no gradients"):
        poptorch.inferenceModel(Net().eval(), opts)(x)
    opts = poptorch.Options()
    opts.anchorTensor("g", "Gradient___fc3.bias")
    with pytest.raises(poptorch.Error, match="'fc3.bias' is not a weight this model trains"):
        poptorch.trainingModel(Net(), opts)(x, y)
    opts = poptorch.Options()
    opts.anchorTensor("t", "no_such_tensor")
    with pytest.raises(poptorch.Error, match="the graph has no tensor 'no_such_tensor'"):
        poptorch.inferenceModel(Net().eval(), opts)(x)
    opts = poptorch.Options().deviceIterations(2)
    opts.anchorTensor("w", "UpdatedVar___fc2.weight", poptorch.OutputMode.All)
    with pytest.raises(poptorch.Error, match="only its value after the run"):
        poptorch.trainingModel(Net(), opts)(torch.rand(4, 4), torch.rand(4, 3))


def test_perf_counters_and_cycles_from_the_simulated_clock(daemon):
    class MatMul(nn.Module):
        def forward(self, a, b):
            return a @ b

    opts = poptorch.Options().deviceIterations(4).logCycleCount(True)
    pm = poptorch.inferenceModel(MatMul(), opts)
    a, b = torch.randn(4, 64, 64), torch.randn(4, 64, 64)
    with pytest.raises(poptorch.Error, match="not run yet"):
        pm.getPerfCounters()
    pm(a, b)
    perf = pm.getPerfCounters()
    assert [len(perf[k]) for k in ("input", "input_complete", "output",
                                   "output_complete")] == [2, 2, 1, 1]
    assert all(len(s) == 4 for k in perf for s in perf[k])
    ins, outs = perf["input"][0], perf["output"][0]
    assert ins == sorted(ins) and all(o > i for i, o in zip(ins, outs))
    lo, hi, avg = pm.getLatency()
    assert 0 < lo <= avg <= hi
    assert pm.getHostIpuLatency() == (0.0, 0.0, 0.0)
    cycles = pm.cycleCount()
    # 4 steps of two 64x64x64 products' worth of work take more than one cycle each.
    assert isinstance(cycles, int) and cycles > 4
    pm.destroy()
    pm = poptorch.inferenceModel(MatMul())
    pm(a[0], b[0])
    with pytest.raises(poptorch.Error, match="logCycleCount"):
        pm.cycleCount()
    pm.destroy()


class Buffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buffer_1", torch.ones(1))
        self.register_buffer("buffer_2", torch.ones(1))

    def forward(self, x):
        return torch.sum(x + self.buffer_1 + self.buffer_2)


def test_copy_named_buffers_to_device(daemon):
    opts = poptorch.Options()
    opts.updatableNamedBuffers(["buffer_1"])
    pm = poptorch.inferenceModel(Buffers(), opts)
    x = torch.ones(3)
    assert pm(x) == 9
    pm.buffer_1.copy_(pm.buffer_1 + 1)
    pm.copyNamedBuffersToDevice()
    assert pm(x) == 12
    pm.buffer_2.copy_(pm.buffer_2 + 1)  # not updatable: the device keeps 1
    pm.copyNamedBuffersToDevice()
    assert pm(x) == 12
    assert pm.buffer_2.item() == 2  # the host's value is left as the caller set it
    pm.destroy()
    pm = poptorch.inferenceModel(Buffers())
    pm(x)
    with pytest.raises(poptorch.Error, match="updatableNamedBuffers"):
        pm.copyNamedBuffersToDevice()
    pm.destroy()
    opts = poptorch.Options()
    opts.updatableNamedBuffers(["non_existing_buffer"])
    with pytest.raises(poptorch.Error, match="no buffer 'non_existing_buffer'"):
        poptorch.inferenceModel(Buffers(), opts)(x)


def test_module_repr_shows_begin_blocks(daemon):
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    assert "BeginBlock(" not in poptorch.module_repr(m)
    poptorch.BeginBlock(m[1], ipu_id=1)
    text = poptorch.module_repr(m)
    assert "(1): BeginBlock(user_id=None, ipu_id=1) ReLU()" in text, text
    assert "BeginBlock(user_id=None, ipu_id=1)" in repr(poptorch.inferenceModel(m))
    poptorch.removeBlocks(m)
    assert "BeginBlock(" not in poptorch.module_repr(m)


def test_executable_and_rng_state(daemon):
    opts = poptorch.Options().randomSeed(7).deviceIterations(2)
    pm = poptorch.trainingModel(Net(), opts)
    assert pm._executable is None
    with pytest.raises(poptorch.Error, match="not been compiled"):
        pm.rng_state
    pm(torch.rand(4, 4), torch.rand(4, 3))
    assert pm._executable is not None
    assert pm.rng_state == [7, 2]
    pm.rng_state = [7, 2]  # the state it has
    with pytest.raises(poptorch.Error, match="cannot be set"):
        pm.rng_state = [3, 0]
    pm.detachFromDevice()
    assert pm._executable is not None and not pm.isAttachedToDevice()  # compiled
    pm.attachToDevice()
    assert pm.isAttachedToDevice()
    pm.destroy()
    assert pm._executable is None


def test_ipu_hardware_is_available_means_a_daemon_serves_ipus(daemon):
    assert poptorch.ipuHardwareIsAvailable()
    assert not poptorch.ipuHardwareIsAvailable(4096)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    saved = os.environ["IPUOF_SERVER"]
    os.environ["IPUOF_SERVER"] = f"127.0.0.1:{port}"
    try:
        assert not poptorch.ipuHardwareIsAvailable()
    finally:
        os.environ["IPUOF_SERVER"] = saved


def test_lightning_strategy_calls(daemon):
    """What Lightning's IPUStrategy does: a training and an inference model of one module,
    swapped by detachFromDevice/attachToDevice at every stage change, setOptimizer every
    batch, Options.toDict(); the weights match torch's training of the same batches."""
    import copy
    torch.manual_seed(1)
    model = Net()
    ref = copy.deepcopy(model)
    opts = poptorch.Options()
    assert opts.toDict()["replication_factor"] == 1
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    train = poptorch.trainingModel(model, opts, optimizer=opt)
    val = poptorch.inferenceModel(model, opts)
    assert train._options is not opts  # its own copy, the output mode made Final
    assert train._options.output_mode == poptorch.OutputMode.Final
    xs = [torch.rand(2, 4) for _ in range(3)]
    ys = [torch.rand(2, 3) for _ in range(3)]
    for epoch in range(2):
        if train._executable and not train.isAttachedToDevice():
            train.attachToDevice()
        for x, y in zip(xs, ys):
            for g in opt.param_groups:
                g["lr"] = 0.05 / (epoch + 1)
            for g in ref_opt.param_groups:
                g["lr"] = 0.05 / (epoch + 1)
            train.setOptimizer(opt)
            train(x, y)
            ref_opt.zero_grad()
            ref(x, y)[1].backward()
            ref_opt.step()
        if train._executable and train.isAttachedToDevice():
            train.detachFromDevice()
        if val._executable and not val.isAttachedToDevice():
            val.attachToDevice()
        ref.eval()
        with torch.no_grad():
            torch.testing.assert_close(val(xs[0]), ref(xs[0]), rtol=1e-5, atol=1e-6)
        ref.train()
        if val.isAttachedToDevice():
            val.detachFromDevice()
    torch.testing.assert_close(model.fc1.weight.detach(), ref.fc1.weight.detach(),
                               rtol=1e-5, atol=1e-6)
    train.destroy()
    val.destroy()


def test_save_and_load(daemon, tmp_path):
    """save / poptorch.load / compileAndExport / loadExecutable: the loaded model is the
    saved graph compiled again (an inference graph from the daemon's executable cache),
    with the module's trained weights, and computes what the saved one did."""
    torch.manual_seed(3)
    model = Net()
    x, y = torch.rand(2, 4), torch.rand(2, 3)
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    pm(x, y)
    path = str(tmp_path / "model.poptorch")
    pm.save(path)
    pm.copyWeightsToHost()
    w = model.fc1.weight.detach().clone()
    out_saved, _ = pm(x, y)  # the next step from the saved weights
    pm.destroy()

    loaded = poptorch.load(path)
    torch.testing.assert_close(loaded.fc1.weight.detach(), w)
    out, _ = loaded(x, y)
    torch.testing.assert_close(out, out_saved, rtol=1e-6, atol=1e-6)
    names = loaded.getTensorNames()
    assert "UpdatedVar___fc1.weight" in names
    loaded.destroy()

    inf = poptorch.inferenceModel(Net().eval())
    path2 = str(tmp_path / "inference.poptorch")
    inf.compileAndExport(path2, x, export_model=False)
    expected = inf(x)
    inf.destroy()
    with pytest.raises(poptorch.Error, match="export_model=False"):
        poptorch.load(path2)
    fresh = poptorch.inferenceModel(Net().eval())
    fresh.loadExecutable(path2)
    assert fresh._exe.cached  # the same graph: the daemon's executable cache answered
    torch.testing.assert_close(fresh(x), expected)  # the saved graph, not this module
    fresh.destroy()
    with pytest.raises(poptorch.Error, match="training model"):
        poptorch.inferenceModel(Net()).loadExecutable(path)
    with open(path2, "wb") as f:
        f.write(b"not a model")
    with pytest.raises(poptorch.Error, match="cannot be read"):
        poptorch.load(path2)


def test_copy_and_pickle_of_a_training_module_take_the_device_weights(daemon, tmp_path):
    """copy.deepcopy and torch.save of a module a training model trains see the trained
    weights (they were the weights before training, the host copy being stale), and
    torch.save works (the weight-syncing subclass could not be pickled)."""
    import copy
    model = Net()
    w0 = model.fc1.weight.detach().clone()
    pm = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    pm(torch.rand(2, 4), torch.rand(2, 3))
    clone = copy.deepcopy(model)
    path = str(tmp_path / "m.pt")
    torch.save(model, path)
    loaded = torch.load(path)
    assert type(loaded) is Net and type(clone) is Net
    trained = model.fc1.weight.detach()
    assert not torch.equal(trained, w0)
    torch.testing.assert_close(clone.fc1.weight.detach(), trained)
    torch.testing.assert_close(loaded.fc1.weight.detach(), trained)
    pm.destroy()
