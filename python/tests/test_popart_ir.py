"""The compiled graph as PopTorch shows it (python/ipuof/_popart_ir.py): the DEBUG lines
of the lowering with each op's PopART name and placement, the session options PopTorch's
compiler derives from the placement, `_debugGetPopartIR()` (PopART's IR JSON) and its
TRACE line. The placement shown is checked against the daemon's memory plan: the weight
bytes the IR puts on each IPU are the bytes the daemon holds there."""
import json
import warnings

import pytest
import torch
from torch import nn

import poptorch

_made = []


@pytest.fixture(autouse=True)
def _clean():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    poptorch.setLogLevel("WARN")
    while _made:
        _made.pop().destroy()


def _keep(pm):
    _made.append(pm)
    return pm


class Three(nn.Module):
    def __init__(self):
        super().__init__()
        self.l0 = nn.Linear(64, 64)
        self.l1 = nn.Linear(64, 64)
        self.l2 = nn.Linear(64, 32)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(self.l0(x))))


def _line(err, *parts):
    return any(all(p in line for p in parts) for line in err.splitlines())


def _ir_weight_bytes(pm):
    """{IPU: bytes of the initializers the IR's ops read there}."""
    ir = json.loads(pm._debugGetPopartIR())
    sizes = {"FLOAT": 4, "FLOAT16": 2}
    weights = {n for n in pm._weights}
    out = {}
    seen = set()
    for op in ir["maingraph"]:
        ipu = int(op["attributes"].get("__ipu_number", 0))
        for i in op["inputs"]:
            if i["name"] in weights and i["name"] not in seen:
                seen.add(i["name"])
                n = 1
                for d in i["shape"].strip("[]").split():
                    n *= int(d)
                out[ipu] = out.get(ipu, 0) + n * sizes[i["type"]]
    return out


def test_layers_before_the_first_block_are_on_ipu0_stage0(daemon, capsys):
    """l0 has no block: PopTorch runs it in its default block, IPU 0 and stage 0 (the
    daemon had it on the first block's IPU 1). The lines say so, the daemon's memory plan
    holds l0's weights on IPU 0 and l1's and l2's on IPU 1, and the result is torch's."""
    torch.manual_seed(0)
    m = Three()
    poptorch.BeginBlock(m.l1, ipu_id=1)
    poptorch.BeginBlock(m.l2, ipu_id=1)
    poptorch.setLogLevel("DEBUG")
    pm = _keep(poptorch.inferenceModel(m, poptorch.Options().deviceIterations(2)))
    x = torch.randn(4, 64)
    torch.testing.assert_close(pm(x), m(x), rtol=1e-5, atol=1e-5)
    err = capsys.readouterr().err
    assert "enablePipelining set to value 1" in err
    assert _line(err, " l0/Gemm:0 ", "[float32(2, 64), mode(Pipelined), ipu(0), stage(0)]")
    assert _line(err, " l1/Gemm:0 ", " mode(Pipelined), ipu(1), stage(1)")
    assert _line(err, " l2/Gemm:0 ", "[float32(2, 32), mode(Pipelined), ipu(1), stage(1)]")
    assert _line(err, "param: %l0.weight : Float(64, 64, strides=[64, 1]", "-> l0.weight")
    daemon_bytes = {m["ipu"]: m["weights"] for m in pm._exe.memory()}
    assert _ir_weight_bytes(pm) == daemon_bytes == {0: 64 * 65 * 4, 1: (64 * 65 + 32 * 65) * 4}


def test_autoincrement_numbers_blocks_from_stage1(daemon, capsys):
    """AutoIncrement gives the blocks stages 1, 2, 3, 4 (PopTorch's stage 0 is its
    default block), a later block back on IPU 1 a stage of its own; the 4-stage pipeline
    equals torch."""

    class Inline(nn.Module):
        def forward(self, x):
            poptorch.Block.useAutoId()
            with poptorch.Block(ipu_id=0):
                x = x * 2
            with poptorch.Block(ipu_id=1):
                x = x * 3
            with poptorch.Block(ipu_id=2):
                x = x * 4
            with poptorch.Block(ipu_id=1):
                x = x * 5
            return x

    opts = poptorch.Options().deviceIterations(4).autoRoundNumIPUs(True)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    poptorch.setLogLevel("DEBUG")
    pm = _keep(poptorch.inferenceModel(Inline(), opts))
    x = torch.randn(4, 5)
    torch.testing.assert_close(pm(x), x * 120)
    err = capsys.readouterr().err
    for name, ipu, stage in (("Mul:0", 0, 1), ("Mul:0/1", 1, 2), ("Mul:0/2", 2, 3),
                             ("Mul:0/3", 1, 4)):
        assert _line(err, f" {name} ", f" mode(Pipelined), ipu({ipu}), stage({stage})]")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(1, 4, 5), nn.MaxPool2d(2), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Linear(40, 10), nn.ReLU())

    def forward(self, x):
        return self.layer2(self.layer1(x).view(5, 40))


@pytest.mark.parametrize("partials", [torch.float32, torch.float16])
def test_ir_json_names_scopes_and_partials(daemon, capsys, partials):
    """_debugGetPopartIR(): PopART's JSON, one op per compiled node named after its
    module ("layer1/0/Conv"), inputs with shape and type, the matmul and convolution
    partials type as PopART writes them; at TRACE the compile logs it."""
    opts = poptorch.Options()
    opts.Precision.setPartialsType(partials)
    poptorch.setLogLevel("TRACE")
    pm = _keep(poptorch.inferenceModel(Net(), opts))
    pm(torch.randn(2, 1, 15, 15))
    text = pm._debugGetPopartIR()
    ir = json.loads(text)
    assert list(ir) == ["maingraph"]
    ops = {op["name"]: op for op in ir["maingraph"]}
    conv = ops["layer1/0/Conv"]
    assert conv["type"] == "Conv"
    assert conv["inputs"][0] == {"name": "input", "shape": "[2 1 15 15]", "type": "FLOAT",
                                 "index": "0"}
    assert conv["inputs"][1]["name"] == "layer1.0.weight"
    assert conv["outputs"] == [{"name": "layer1/0/Conv:0", "index": "0"}]
    assert conv["attributes"]["kernel_shape"] == "[5 5]"
    half = partials == torch.float16
    assert conv["attributes"]["partialsType[0]"] == ("half" if half else "float")
    mm = [op for op in ir["maingraph"] if op["type"] in ("MatMul", "Gemm")]
    assert mm and all(op["attributes"]["partialsType"] == "MatMulPartialsType::" +
                      ("HALF" if half else "FLOAT") for op in mm)
    assert {"layer1/1/MaxPool", "layer1/2/Relu", "layer2/1/Relu"} <= set(ops)
    assert "Popart IR: " + text in capsys.readouterr().err


def test_ir_without_module_namescope(daemon):
    opts = poptorch.Options()
    opts.disableModuleNamescope()
    pm = _keep(poptorch.inferenceModel(Net(), opts))
    pm(torch.randn(2, 1, 15, 15))
    names = [op["name"] for op in json.loads(pm._debugGetPopartIR())["maingraph"]]
    assert "Conv" in names and not any("/" in n for n in names)


@pytest.mark.parametrize("make,ops", [
    (lambda p: torch.optim.SGD(p, lr=0.01), {"SGD0VarUpdate": 2}),
    (lambda p: poptorch.optim.SGD(p, lr=0.01, momentum=0.9, use_combined_accum=True),
     {"SGD1AcclUpdate": 2, "SGD1VarUpdate": 2}),
    (lambda p: poptorch.optim.SGD(p, lr=0.01, momentum=0.9),
     {"SGD2PartialAcclUpdate": 2, "Accumulate": 2, "SGD2VarUpdate": 2}),
    (lambda p: torch.optim.AdamW(p, lr=0.01), {"AdamUpdater": 2, "AdamVarUpdate": 2}),
])
def test_ir_lists_the_optimizer_update_of_each_trained_weight(daemon, make, ops):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x, y):
            out = self.lin(x)
            return out, nn.functional.cross_entropy(out, y)

    m = Model()
    pm = _keep(poptorch.trainingModel(m, optimizer=make(m.parameters())))
    pm(torch.randn(2, 4), torch.tensor([0, 2]))
    ir = json.loads(pm._debugGetPopartIR())
    counts = {}
    for op in ir["maingraph"]:
        counts[op["type"]] = counts.get(op["type"], 0) + 1
    for t, n in ops.items():
        assert counts.get(t) == n, (t, counts)
    others = {"SGD0VarUpdate", "SGD1VarUpdate", "SGD2VarUpdate", "AdamVarUpdate"} - set(ops)
    assert not others & set(counts), counts


def test_buffers_equal_to_a_weight_are_parameters(daemon, capsys):
    """A fresh BatchNorm's running_var equals its weight, and torch's exporter makes it an
    Identity of the weight: the lowering still lists it as the parameter it is."""
    model = nn.Sequential()
    model.add_module("lin", nn.Linear(16, 16))
    model.add_module("bn", nn.BatchNorm1d(16))
    poptorch.setLogLevel("DEBUG")
    pm = _keep(poptorch.inferenceModel(model))
    pm(torch.randn(16, 16))
    err = capsys.readouterr().err
    assert _line(err, "param: %bn.running_var : Float(16, strides=[1], requires_grad=0, "
                 "device=ipu:0) -> bn.running_var [float32(16)]")


def test_a_module_assigned_to_a_block_twice_is_refused():
    m = nn.Linear(2, 2)
    poptorch.BeginBlock(m, ipu_id=1)
    with pytest.raises(poptorch.Error, match="module has already been assigned to a block"):
        poptorch.BeginBlock(m, ipu_id=1)
    poptorch.removeBlocks(m)
    poptorch.BeginBlock(m, ipu_id=1)


def test_block_start_without_a_context_places_inline_ops(daemon, capsys):
    """Block.start(ipu_id=...) with no `with`: the inline ops and layers run after it
    are its block (main: "block '0' contains no module"); x * 4 on IPU 0, the Linear and
    x * 2 on IPU 1, whose weights the daemon holds there; the result is torch's."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(5, 5)

        def forward(self, x):
            poptorch.Block.useAutoId()
            poptorch.Block.start(ipu_id=0)
            x = x * 4
            poptorch.Block.start(ipu_id=1)
            return self.lin(x) * 2

    m = Model()
    poptorch.setLogLevel("DEBUG")
    pm = _keep(poptorch.inferenceModel(m, poptorch.Options().deviceIterations(2)))
    x = torch.randn(2, 5)
    torch.testing.assert_close(pm(x), m(x))
    err = capsys.readouterr().err
    assert "enablePipelining set to value 1" in err
    assert _line(err, " Mul:0 ", " mode(Pipelined), ipu(0), stage(0)]")
    assert _line(err, " lin/Gemm:0 ", " mode(Pipelined), ipu(1), stage(1)]")
    assert _line(err, " Mul:0/1 ", " mode(Pipelined), ipu(1), stage(1)]")
    held = {m["ipu"]: m["weights"] for m in pm._exe.memory()}
    assert held[1] >= 30 * 4 > held[0]   # the Linear's 30 floats (and the constants)


@pytest.mark.parametrize("liveness,stride,phases", [
    (poptorch.Liveness.AlwaysLive, 1, 3), (poptorch.Liveness.OffChipAfterFwd, 1, 6),
    (poptorch.Liveness.OffChipAfterFwdNoOverlap, 2, 8),
    (poptorch.Liveness.OffChipAfterEachPhase, 4, 12)])
def test_serial_phases_as_poptorch_numbers_them(daemon, capsys, liveness, stride, phases):
    """Serial phased execution: toDict has the strategy's backend options, the phases
    of the blocks are PopTorch's (with the gaps off-chip liveness leaves), and the
    compile equals torch."""

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(8, 7), nn.Linear(7, 6), nn.Linear(6, 5)

        def forward(self, x):
            with poptorch.Block("B1"):
                x = self.fc1(x)
            with poptorch.Block("B2"):
                x = self.fc2(x)
            with poptorch.Block("B3"):
                return self.fc3(x)

    strategy = poptorch.SerialPhasedExecution("B1", "B2", "B3")
    for b in ("B1", "B2", "B3"):
        strategy.stage(b).ipu(0)
    strategy.setTensorsLiveness(liveness)
    opts = poptorch.Options()
    opts.setExecutionStrategy(strategy)
    d = opts.toDict()
    assert (d["serial_phases_execution"], d["tensors_liveness"]) == (True, liveness.value)
    m = Model()
    poptorch.setLogLevel("DEBUG")
    pm = _keep(poptorch.inferenceModel(m, opts))
    x = torch.randn(8)
    torch.testing.assert_close(pm(x), m(x))
    err = capsys.readouterr().err
    assert "poptorch.Options set serial_phases_execution to value true" in err
    assert f"executionPhaseSettings.phases set to value {phases}" in err
    for k in range(3):
        assert _line(err, f" fc{k + 1}/Transpose:0 [float32({8 - k}, {7 - k}), "
                     f"mode(Phased), ipu(0), phase({k * stride})]")
