"""poptorch.Options as PopTorch programs use them: values kept by the calls ipuofd ignores
(printed, copied, in toDict()), PopART options checked as PopTorch's backend checks them,
options files, copies that are not frozen, the offline target, the exported graph, the
profiling report, the mean reduction strategy and isRunningOnIpu() during the capture."""
import copy
import json
import warnings

import pytest
import torch

import poptorch
from poptorch import poptorch_core as core


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_recorded_options_change_the_printed_form():
    """Two Options print alike exactly when they hold the same settings, also for calls
    that change nothing on ipuofd (PopTorch keeps their values)."""
    ref = poptorch.Options()
    a = poptorch.Options()
    a.Precision.enableFloatingPointExceptions(True)
    assert repr(a) != repr(ref)
    assert a._Popart.options["enableFloatingPointChecks"] is True
    b = poptorch.Options().from_json('{"Precision.enableFloatingPointExceptions": true}')
    assert repr(a) == repr(b)
    c = poptorch.Options()
    c._Popart.set("saveInitializersToFile", "my_file.onnx")
    assert repr(c) != repr(ref)
    assert repr(c) == repr(poptorch.Options().from_json(
        '{"_Popart.set": ["saveInitializersToFile", "my_file.onnx"]}'))
    assert str(poptorch.Options().replicationFactor(4)).startswith("Options(")


def test_from_json_converts_enum_names():
    o = poptorch.Options().from_json('{"connectionType": "ConnectionType.OnDemand"}')
    assert o.connection_type is poptorch.ConnectionType.OnDemand
    assert repr(o) == repr(poptorch.Options().connectionType(
        poptorch.ConnectionType.OnDemand))


def test_deep_copy_is_independent_and_not_frozen():
    opts = poptorch.Options()
    opts.deviceIterations(5)
    opts._Popart.set("autoRecomputation", 3)
    opts.TensorLocations.setWeightLocation(poptorch.TensorLocationSettings())
    opts._freeze()
    c = copy.deepcopy(opts)
    c.deviceIterations(4)
    c._Popart.set("autoRecomputation", 2)
    c.Precision.setPartialsType(torch.float16)
    c.TensorLocations.setWeightLocation(
        poptorch.TensorLocationSettings().useOnChipStorage(False))
    assert opts.device_iterations == 5 and c.device_iterations == 4
    assert opts._Popart.options["autoRecomputation"] == 3
    assert c._Popart.options["autoRecomputation"] == 2
    assert "partialsTypeMatMuls" not in opts._Popart.options
    assert c.Precision._popart() is c._Popart  # the copy's groups share the copy's
    assert opts.TensorLocations.location_weight["onChip"]
    assert not c.TensorLocations.location_weight["onChip"]
    assert opts.sync_pattern == poptorch.SyncPattern.Full
    assert opts.available_memory_proportion == {}
    with pytest.raises(poptorch.Error, match="frozen"):
        opts._Popart.set("autoRecomputation", 1)


def test_validate_options_refuses_as_the_backend_does(capsys):
    opts = poptorch.Options()
    opts._Popart.set("asdfasdf", True)
    with pytest.raises(poptorch.Error, match="Unknown bool option asdfasdf"):
        core._validateOptions(opts.toDict())
    opts = poptorch.Options()
    opts._Popart.set("dotChecks", torch.empty(1, 1))
    with pytest.raises(poptorch.Error, match="Unknown value type Tensor for option dotChecks"):
        core._validateOptions(opts.toDict())
    opts = poptorch.Options()
    opts._Popart.set("hardwareInstrumentations", {0, 1})
    opts._Popart.set("engineOptions", {"debug.allowOutOfMemory": "true"})
    opts._Popart.set("enableOutlining", True)
    poptorch.setLogLevel("DEBUG")
    try:
        core._validateOptions(opts.toDict())
    finally:
        poptorch.setLogLevel("WARN")
    err = capsys.readouterr().err  # the logger writes to sys.stderr as it is now
    assert "poptorch.Options added 0 to hardwareInstrumentations" in err
    assert "poptorch.Options set engineOptions[debug.allowOutOfMemory] to true" in err
    assert "poptorch.Options set enableOutlining to value true" in err


def test_load_from_file(tmp_path):
    first = tmp_path / "a.conf"
    first.write_text("deviceIterations(2)\n  replicationFactor(2)\n\n# a comment\n"
                     "setExecutionStrategy(poptorch.ShardedExecution())  # inline\n")
    second = tmp_path / "b.conf"
    second.write_text("deviceIterations(1)\n")
    opts = poptorch.Options().loadFromFile(str(first)).loadFromFile(str(second))
    assert opts.device_iterations == 1 and opts.replication_factor == 2
    assert isinstance(opts._execution_strategy, poptorch.ShardedExecution)
    with open(second, "a") as f:
        f.write("outputMode(poptorch.OutputMode.All\n")
    with pytest.raises(poptorch.ConfigFileError,
                       match=r"SyntaxError at line 2 of b.conf: .*\n> "
                             r"options.outputMode\(poptorch.OutputMode.All"):
        opts.loadFromFile(str(second))
    assert poptorch.options.ConfigFileError is poptorch.ConfigFileError


def test_num_io_tiles_range():
    o = poptorch.Options()
    for bad in (10, 193, 33):
        with pytest.raises(AssertionError, match="numIOTiles must be an even number "
                                                 "between 32 and 192"):
            o.TensorLocations.numIOTiles(bad)
    o.TensorLocations.numIOTiles(100)
    assert o.toDict()["numIOTiles"] == 100


def test_is_running_on_ipu_inside_the_captured_forward(daemon):
    class Net(torch.nn.Module):
        def forward(self, x, y):
            return x + y if poptorch.isRunningOnIpu() else x * y

    model = Net()
    pm = poptorch.inferenceModel(model)
    x, y = torch.tensor([50.0]), torch.tensor([2.0])
    assert pm(x, y).item() == 52.0
    assert model(x, y).item() == 100.0
    assert not poptorch.isRunningOnIpu()
    pm.destroy()


def test_offline_target_refuses_to_run(daemon):
    pm = poptorch.inferenceModel(Add(), poptorch.Options().useOfflineIpuTarget())
    with pytest.raises(AssertionError, match="Trying to run a model on an offline device"):
        pm(torch.ones(2), torch.zeros(2))
    with pytest.raises(poptorch.Error, match="ConnectionType.Never"):
        pm(torch.ones(2), torch.zeros(2))


def test_export_proto_file(daemon, tmp_path, monkeypatch):
    import onnx
    path = tmp_path / "new_dir" / "model.proto"
    monkeypatch.setenv("POPTORCH_EXPORT_PROTO_FILE", str(path))
    pm = poptorch.inferenceModel(Add())
    assert torch.equal(pm(torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ["x", "y"]
    assert any(n.op_type == "Add" for n in model.graph.node)
    pm.destroy()


def test_profile_report_under_the_model_name(daemon, tmp_path, monkeypatch):
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    for name in ("tommyflowers", None):
        opts = poptorch.Options().enableProfiling(str(tmp_path))
        if name:
            opts.modelName(name)
        pm = poptorch.inferenceModel(torch.nn.Linear(10, 10), opts)
        pm(torch.randn(4, 10))
        report = tmp_path / (name or "inference") / "profile.pop"
        assert report.is_file()
        trace = json.loads(report.read_text())  # Chrome trace JSON, not PopVision's
        assert trace["traceEvents"]
        pm.destroy()


@pytest.mark.parametrize("accum_type, combined, expected", [
    (torch.float32, False, "Post"), (torch.float16, False, "Running"),
    (torch.float16, True, "Post"), (None, False, "Post")])
def test_mean_reduction_strategy_default(daemon, accum_type, combined, expected):
    model = torch.nn.Sequential(torch.nn.Linear(2, 1))

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            return self.m(x).sum()

    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.01, accum_type=accum_type,
                                   use_combined_accum=combined)
    pm = poptorch.trainingModel(WithLoss(), poptorch.Options(), optimizer)
    pm.compile(torch.ones(1, 2))
    assert pm.options.Training.meanAccumulationAndReplicationReductionStrategy == \
        getattr(poptorch.MeanReductionStrategy, expected)
    pm.destroy()
    opts = poptorch.Options()
    opts.Training.setMeanAccumulationAndReplicationReductionStrategy(
        poptorch.MeanReductionStrategy.Running)
    assert opts.Training.meanAccumulationAndReplicationReductionStrategy == \
        poptorch.MeanReductionStrategy.Running
    with pytest.raises(ValueError, match="MeanReductionStrategy"):
        opts.Training.setMeanAccumulationAndReplicationReductionStrategy(7)


def test_log_lines_follow_a_replaced_stderr(capsys):
    """The logger was made at import; capsys replaced sys.stderr since: the lines reach
    the stream in place when they are logged."""
    poptorch.setLogLevel("INFO")
    try:
        poptorch.logger.info("first line")
    finally:
        poptorch.setLogLevel("WARN")
    assert "first line" in capsys.readouterr().err


def test_cycle_count_is_logged_at_debug(daemon, capsys):
    """logCycleCount(True): each run logs its cycles on the simulated clock at debug level,
    the figure cycleCount() gives."""
    pm = poptorch.inferenceModel(Add(), poptorch.Options().logCycleCount(True))
    poptorch.setLogLevel("DEBUG")
    try:
        pm(torch.ones(2), torch.ones(2))
    finally:
        poptorch.setLogLevel("WARN")
    err = capsys.readouterr().err
    assert f"Total number of IPU cycles: {pm.cycleCount()}" in err
    assert pm.cycleCount() > 0
    pm.destroy()
