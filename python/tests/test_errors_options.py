"""PopTorch's error classes with the daemon's sentences, and the options' behaviour
(validation, printed form, clone, options with no meaning here)."""
import copy
import socket
import warnings

import pytest
import torch

import poptorch
from models import ExampleModelWithLoss, Network, TrainingModelWithLoss  # noqa: F401


def small():
    torch.manual_seed(0)
    return ExampleModelWithLoss([3, 2], 2)


def batch(n=4):
    return torch.rand(n, 3, 2), torch.randint(0, 2, (n,))


def test_error_classes():
    assert issubclass(poptorch.RecoverableError, poptorch.Error)
    assert issubclass(poptorch.UnrecoverableError, poptorch.Error)
    e = poptorch.RecoverableError("lost", "IPU_RESET")
    assert e.recovery_action == "IPU_RESET"
    assert str(e) == "lost\nRecovery action required: IPU_RESET"


def test_unreachable_daemon_is_an_error_with_the_sentence(monkeypatch):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setenv("IPUOF_SERVER", f"127.0.0.1:{port}")
    pm = poptorch.inferenceModel(small())
    with pytest.raises(poptorch.Error) as info:
        pm(batch()[0])
    assert f"127.0.0.1:{port}" in str(info.value)
    assert "IPUOF_E_IO" in str(info.value)


def test_too_many_ipus_names_the_count(daemon):
    opts = poptorch.Options().replicationFactor(8)
    pm = poptorch.trainingModel(small(), opts)
    with pytest.raises(poptorch.Error) as info:
        pm(*batch(16))
    assert "8" in str(info.value) and "IPU" in str(info.value)


def test_power_of_two_and_auto_round(daemon):
    opts = poptorch.Options().replicationFactor(3)
    with pytest.raises(poptorch.Error, match="autoRoundNumIPUs"):
        poptorch.trainingModel(small(), opts)(*batch(6))
    opts = poptorch.Options().replicationFactor(3)
    opts.autoRoundNumIPUs(True)
    pm = poptorch.trainingModel(small(), opts)
    out, loss = pm(*batch(6))
    assert out.shape == (6, 2) and loss.shape == (3,)
    pm.destroy()


def test_bad_batch_dimension_is_poptorch_text(daemon):
    opts = poptorch.Options().deviceIterations(3)
    pm = poptorch.trainingModel(small(), opts)
    with pytest.raises(poptorch.Error, match=r"Invalid batch dimension: In the input x, the "
                       r"batch dimension \(4\) must be a multiple of"):
        pm(*batch(4))


def test_reset_partition_is_recoverable_and_reattach_works(daemon):
    if daemon is None:
        pytest.skip("IPUOF_TEST_SERVER given: no admin socket to reset with")
    model = small()
    pm = poptorch.trainingModel(model, poptorch.Options(),
                                torch.optim.SGD(model.parameters(), lr=0.1))
    pm(*batch())
    r = daemon.ipuctl("reset", "--all", "--force")
    assert r.returncode == 0, r.stderr
    with pytest.raises(poptorch.RecoverableError) as info:
        pm(*batch())
    assert info.value.recovery_action == "REATTACH"
    assert "reset" in str(info.value)
    pm.attachToDevice()
    out, loss = pm(*batch())
    assert out.shape == (4, 2)
    pm.destroy()


def test_unsupported_op_sentence(daemon):
    class Arg(torch.nn.Module):
        def forward(self, x):
            return torch.argmax(x, dim=-1)

    pm = poptorch.inferenceModel(Arg())
    try:
        pm(torch.rand(2, 3))
    except poptorch.Error as exc:
        assert "ArgMax" in str(exc) and "IPUOF_E_UNSUPPORTED" in str(exc)
        assert exc.type == "compiler" or exc.type
    else:  # once ipuofd has ArgMax (issue 10) the model runs
        pass


@pytest.mark.parametrize("kind", ["pipelined", "sharded", "phased"])
def test_execution_strategies_listing_5_6(daemon, kind):
    """Listing 5.6's three strategies over the tutorial network's blocks B1..B4 (pipelined
    and sharded on IPUs 0..3, phased on IPU 0): one call (4 micro-batches accumulated,
    8 for the pipeline, whose minimum is 7) trains the weights PyTorch trains. Without
    the library's placement options, a model over 4 IPUs stops with an Error naming what
    is missing."""
    import ipuof._lib
    torch.manual_seed(9)
    net = TrainingModelWithLoss(Network())
    ref = copy.deepcopy(net)
    blocks = ["B1", "B2", "B3", "B4"]
    cls = {"pipelined": poptorch.PipelinedExecution, "sharded": poptorch.ShardedExecution,
           "phased": poptorch.SerialPhasedExecution}[kind]
    strategy = cls(*blocks)
    for i, b in enumerate(blocks):
        strategy.stage(b).ipu(0 if kind == "phased" else i)
    opts = poptorch.Options()
    opts.setExecutionStrategy(strategy)
    # PopTorch's minimum for a pipeline of 4 stages in training is 2*4-1 = 7 micro-batches
    # (test_pipeline_shorter_than_its_stages_is_refused).
    acc = 8 if kind == "pipelined" else 4
    opts.Training.gradientAccumulation(acc)
    pm = poptorch.trainingModel(net, opts, torch.optim.SGD(net.parameters(), lr=0.05))
    x, y = torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))
    if not ipuof._lib.PLACEMENT and kind != "phased":
        with pytest.raises(poptorch.Error, match="placing blocks on 4 IPUs is not supported"):
            pm(x, y)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, loss = pm(x, y)
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    m = 16 // acc
    for k in range(acc):
        (ref(x[m * k:m * k + m], y[m * k:m * k + m])[1] / acc).backward()
    opt.step()
    for (name, p), (_, q) in zip(net.named_parameters(), ref.named_parameters()):
        assert torch.allclose(p.detach(), q.detach(), rtol=1e-4, atol=1e-6), name
    pm.destroy()


def test_blocks_are_recorded_as_prefixes():
    from ipuof import blocks
    net = TrainingModelWithLoss(Network())
    rec = blocks._Recorder(net)
    with rec:
        net(torch.randn(2, 1, 28, 28), torch.tensor([1, 2]))
    assert rec.order == ["B1", "B2", "B3", "B4"]
    assert rec.blocks["B1"]["prefixes"] == ["/model/layer1/"]
    assert rec.blocks["B3"]["prefixes"] == ["/model/layer3/", "/model/layer3_act/"]
    assert rec.blocks["B4"]["prefixes"] == ["/model/layer4/", "/loss/"]
    s = poptorch.ShardedExecution(poptorch.Stage("B1", "B2").ipu(0), "B3", "B4")
    s.stage("B3").ipu(1)
    s.stage("B4").ipu(1)
    assert s.placement(rec.blocks, rec.order) == [
        ("/model/layer1/", 0, 0), ("/model/layer2/", 0, 0), ("/model/layer3/", 1, 1),
        ("/model/layer3_act/", 1, 1), ("/model/layer4/", 2, 1), ("/loss/", 2, 1)]
    with pytest.raises(ValueError, match="Unknown Block 'B9'"):
        s.stage("B9")


def test_off_chip_optimizer_state(daemon):
    """setOptimizerLocation(useOnChipStorage(False)) (the tutorial's --offload-optimiser):
    the same training as on chip, or an Error naming it while the library lacks it."""
    import ipuof._lib
    opts = poptorch.Options()
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings().useOnChipStorage(False))
    model = small()
    ref = copy.deepcopy(model)
    pm = poptorch.trainingModel(model, opts, torch.optim.AdamW(model.parameters(), lr=0.01))
    x, t = batch()
    if not ipuof._lib.PLACEMENT:
        with pytest.raises(poptorch.Error, match=r"off-chip tensor locations \(optimizer\)"):
            pm(x, t)
        return
    pm(x, t)
    opt = torch.optim.AdamW(ref.parameters(), lr=0.01)
    ref(x, t)[1].backward()
    opt.step()
    assert torch.allclose(model.fc.weight.detach(), ref.fc.weight.detach(), rtol=1e-4,
                          atol=1e-6)
    pm.destroy()


def _two_process_runs(cmds, env):
    """Runs the commands of one two-process job together; their JSON lines by process."""
    import json
    import subprocess
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for c in cmds]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        print(out, err[-3000:])
        assert p.returncode == 0, err[-3000:]
    # mpirun forwards each process's output in chunks of its own, so one process's line can
    # run into the next one's without a newline (seen under load): read objects, not lines.
    dec = json.JSONDecoder()
    got = []
    for out, _ in outs:
        i = out.find('{"process"')
        while i >= 0:
            obj, end = dec.raw_decode(out, i)
            got.append(obj)
            i = out.find('{"process"', end)
    return {g["process"]: g for g in got}


def _check_same_as_one_process(got):
    """Two processes x 1 replica against one process x 2 replicas: the same weights after
    the same steps, and each process given its replicas' rows of every global batch."""
    from models import ExampleDataset
    assert sorted(got) == [0, 1]
    one = poptorch.Options()
    one.randomSeed(5)
    one.deviceIterations(2)
    one.replicationFactor(2)
    loader = poptorch.DataLoader(one, ExampleDataset([3, 2], 64), batch_size=4, shuffle=True)
    torch.manual_seed(1)
    model = ExampleModelWithLoss([3, 2], 2)
    pm = poptorch.trainingModel(model, one, torch.optim.SGD(model.parameters(), lr=0.1))
    calls = len(got[0]["rows"])
    assert calls == 4 == len(got[1]["rows"])  # dist_worker.CALLS
    for i, (data, labels) in enumerate(loader):
        if i == calls:
            break
        pm(data, labels)
        # One process's batch: [iterations][replicas][rows]; process p has replica p.
        per_iter = data.reshape(2, 2, 4, 3, 2)
        for p in (0, 1):
            assert torch.equal(per_iter[:, p].reshape(8, 3, 2)[:, 0, 0],
                               torch.tensor(got[p]["rows"][i]))
    w = (model.fc.weight.detach() - torch.tensor(got[0]["weight"])).abs().max().item()
    b = (model.fc.bias.detach() - torch.tensor(got[0]["bias"])).abs().max().item()
    print(f"two processes against one: max abs difference {max(w, b)}")
    assert max(w, b) <= 1e-5, f"max abs difference {max(w, b)}"
    pm.destroy()


def test_distributed_two_processes_reference_000(daemon):
    """Reference 000: two processes launched by mpirun, configureProcessId from Open MPI's
    environment, one partition; CALLS calls train what one process with both replicas
    trains, each process drawing its replicas' share of the data."""
    import os
    import shutil
    import sys
    import ipuof._lib
    assert ipuof._lib.JOBS, f"{ipuof._lib.path} has no jobs of several processes"
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun is missing: make deps installs Debian's openmpi-bin"
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."),
               IPUOF_PARTITION=f"pytest-mpi-{os.getpid()}")
    got = _two_process_runs([[mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                              "-x", "PYTHONPATH", "-x", "IPUOF_SERVER", "-x",
                              "IPUOF_PARTITION", "-x", "IPUOF_CLIENT_LIB", sys.executable,
                              os.path.join(os.path.dirname(__file__), "dist_worker.py")]],
                            env)
    _check_same_as_one_process(got)


def test_distributed_configure_process_id(daemon):
    """Two processes started by hand, each calling configureProcessId(i, 2) (no launcher
    variables): the same job as under mpirun."""
    import os
    import sys
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."),
               IPUOF_PARTITION=f"pytest-cfg-{os.getpid()}")
    for k in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "IPUOF_PROCESS_ID",
              "IPUOF_NUM_PROCESSES"):
        env.pop(k, None)
    worker = os.path.join(os.path.dirname(__file__), "dist_worker.py")
    got = _two_process_runs([[sys.executable, worker, str(i), "2"] for i in (0, 1)], env)
    _check_same_as_one_process(got)


def test_connection_type_never_refuses_to_run():
    opts = poptorch.Options().connectionType(poptorch.ConnectionType.Never)
    pm = poptorch.inferenceModel(small(), opts)
    pm.compile(batch()[0])  # captured, no daemon needed
    with pytest.raises(poptorch.Error, match="ConnectionType.Never"):
        pm(batch()[0])


def test_profiling_switch(daemon, monkeypatch, tmp_path):
    """POPLAR_ENGINE_OPTIONS' autoReport writes the run's trace (Chrome trace-event JSON)
    into the directory, and its SVG timeline once the model leaves the device; a library
    without traces gets a warning saying so."""
    import json
    import ipuof._lib
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", '{"autoReport.all":"true",'
                       f'"autoReport.directory":"{tmp_path}"}}')
    pm = poptorch.inferenceModel(small())
    if not ipuof._lib.PLACEMENT:
        with pytest.warns(UserWarning, match="profiling"):
            pm(batch()[0])
        pm.destroy()
        return
    pm(batch()[0])
    assert not list(tmp_path.glob("*.svg"))  # drawn when the model leaves the device
    pm.destroy()
    traces = list(tmp_path.glob("*.trace.json"))
    assert traces, f"no trace in {tmp_path}: {list(tmp_path.iterdir())}"
    assert "traceEvents" in json.loads(traces[0].read_text())
    svg = tmp_path / traces[0].name.replace(".trace.json", ".timeline.svg")
    assert svg.exists(), f"no SVG timeline in {tmp_path}: {list(tmp_path.iterdir())}"
    text = svg.read_text()
    assert text.lstrip().startswith(("<svg", "<?xml")) and "</svg>" in text


def test_options_validation_repr_clone_and_ignored_calls():
    opts = poptorch.Options()
    opts.deviceIterations(4).replicationFactor(2)
    opts.Training.gradientAccumulation(3)
    opts.outputMode(poptorch.OutputMode.EveryN, 2)
    assert opts.device_iterations == 4 and opts.Training.gradient_accumulation == 3
    text = repr(opts)
    assert text.startswith("Options(replication_factor=2,")
    assert "device_iterations=4" in text
    assert "Training=_TrainingOptions(gradient_accumulation=3," in text
    c = opts.clone()
    c.deviceIterations(7)
    assert opts.device_iterations == 4 and c.device_iterations == 7
    with pytest.raises(ValueError):
        opts.deviceIterations(0)
    with pytest.raises(ValueError, match="NoReduction"):
        opts.Training.accumulationAndReplicationReductionType(
            poptorch.ReductionType.NoReduction)
    with pytest.raises(ValueError, match="output_return_period"):
        opts.outputMode(poptorch.OutputMode.EveryN)
    with pytest.raises(ValueError, match="factor of replication_factor"):
        poptorch.Options().replicationFactor(4).inputReplicaGrouping(
            3, poptorch.CommGroupType.Consecutive)
    import ipuof.options
    ipuof.options._warned.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        opts._Popart.set("saveInitializersToFile", "x.onnx")
        opts.enableExecutableCaching("/tmp/cache")
        opts.Precision.runningStatisticsAlwaysFloat(True)
        opts.enableExecutableCaching("/tmp/cache2")  # warned once per name
    assert len(w) == 3 and all("no effect on ipuofd" in str(x.message) for x in w)
    with pytest.raises(AttributeError):
        opts.deviceIteration(3)  # a typo is not swallowed
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings().useOnChipStorage(False))
    assert "location_optimizer={'onChip': False}" in repr(opts)


def test_options_frozen_after_compile(daemon):
    opts = poptorch.Options()
    pm = poptorch.inferenceModel(small(), opts)
    pm(batch()[0])
    with pytest.raises(poptorch.Error, match="frozen"):
        opts.deviceIterations(2)
    pm.destroy()


def test_both_names_are_one_module():
    import importlib
    import ipuof
    assert poptorch is ipuof
    optim = importlib.import_module("poptorch.optim")
    assert optim.AdamW is ipuof.optim.AdamW


def test_options_are_frozen_and_copied_when_a_model_or_loader_takes_them(daemon):
    """PopTorch's rule: the Options a model or DataLoader was given cannot change
    afterwards (the change would be silently ignored by the compiled model), the model
    keeps its own copy (poptorch_model.options) with the output mode made explicit, and
    clone() gives a copy that can change."""
    opts = poptorch.Options()
    pm = poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)
    with pytest.raises(poptorch.Error, match="frozen"):
        opts.randomSeed(42)
    with pytest.raises(poptorch.Error, match="frozen"):
        pm.options.set(random_seed=42)
    with pytest.raises(poptorch.Error, match="frozen"):
        opts._Popart.set("groupNormStridedChannelGrouping", True)
    assert opts.defaultOutputMode()
    assert pm.options.output_mode == poptorch.OutputMode.All
    assert poptorch.trainingModel(torch.nn.Linear(2, 2), opts).options.output_mode == \
        poptorch.OutputMode.Final
    c = opts.clone()
    c.randomSeed(3)
    opts2 = poptorch.Options()
    poptorch.DataLoader(opts2, torch.utils.data.TensorDataset(torch.zeros(4, 1)))
    with pytest.raises(poptorch.Error, match="frozen"):
        opts2.deviceIterations(2)


def test_blocks_of_inline_ops(daemon):
    """poptorch.Block around ops that are no module's (x * 2 inline): while the exporter
    traces, the block pushes a scope of its own, so its ops are named under it and placed
    on its IPU (the block 'contained no module' and was refused)."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(5, 5)

        def forward(self, x):
            with poptorch.Block("first", ipu_id=0):
                x = self.fc(x) * 2
            with poptorch.Block("second", ipu_id=1):
                x = torch.relu(x) + 1
            return x

    m = M().eval()
    opts = poptorch.Options().deviceIterations(2)
    opts.setExecutionStrategy(poptorch.PipelinedExecution("first", "second"))
    pm = poptorch.inferenceModel(m, opts)
    x = torch.randn(4, 5)
    out = pm(x)
    torch.testing.assert_close(out, m(x), rtol=1e-5, atol=1e-6)
    assert pm._ipus == 2
    placed = {p: ipu for p, _stage, ipu in pm._placement_opts["blocks"]}
    assert placed["/ipuof_block_1/"] == 1, placed
    pm.destroy()
