"""PopTorch names that programs (and PopTorch's own tests) reach for: poptorch_core,
setLogLevel, the custom argument parsers, the enums, and the optimizers RMSprop and LAMB."""
import copy
import math

import pytest
import torch
import torch.nn as nn

import poptorch
import poptorch.poptorch_core as core


def test_poptorch_core_errors_are_the_package_classes():
    assert core.Error is poptorch.Error
    assert core.RecoverableError is poptorch.RecoverableError
    assert core.UnrecoverableError is poptorch.UnrecoverableError
    assert not core.isCompilingWithDispatcher()
    with pytest.raises(poptorch.RecoverableError) as info:
        core._throwTestError(core.TestErrorType.PoplarRecoverableFullReset)
    assert info.value.recovery_action == "FULL_RESET"
    assert "throwTestError::bottomLevel" in info.value.location


def test_validate_options():
    core._validateOptions(poptorch.Options().toDict())
    with pytest.raises(poptorch.Error, match="Unknown uint64 option nonsense"):
        core._validateOptions({"nonsense": 1})


def test_set_log_level():
    poptorch.setLogLevel("DEBUG")
    assert poptorch.logger.level == 10
    poptorch.setLogLevel(3)
    assert poptorch.logger.level == 30
    with pytest.raises(ValueError, match="Unknown log level: LOUD"):
        poptorch.setLogLevel("LOUD")
    poptorch._logging.setPopartLogLevel("INFO")
    with pytest.raises(ValueError):
        poptorch._logging.setPopartLogLevel("LOUD")
    poptorch.setLogLevel("WARN")


def test_enums_exist():
    assert poptorch.MatMulSerializationMode.OutputChannels.value == "output_channels"
    assert poptorch.HalfFloatCastingBehavior.HalfUpcastToFloat == 1
    assert poptorch.VariableRetrievalMode.AllReplicas == 2
    assert poptorch.OverlapMode.NoOverlap.value == "no_overlap"
    assert poptorch.MultiConvPlanType.Serial == 1


class Pair:
    def __init__(self, a, b, tag):
        self.a, self.b, self.tag = a, b, tag


class PairParser(poptorch.ICustomArgParser):
    def yieldTensors(self, struct):
        yield struct.a
        yield struct.b

    def reconstruct(self, original_structure, tensor_iterator):
        return Pair(next(tensor_iterator), next(tensor_iterator), original_structure.tag)


def test_custom_arg_parser_inputs_and_outputs(daemon):
    poptorch.registerCustomArgParser(Pair, PairParser())
    try:
        class M(nn.Module):
            def forward(self, p):
                return Pair(p.a * p.b, p.a - p.b, p.tag + "!")

        a, b = torch.rand(2, 3), torch.rand(2, 3)
        pm = poptorch.inferenceModel(M())
        out = pm(Pair(a, b, "x"))
        assert isinstance(out, Pair) and out.tag == "x!"
        torch.testing.assert_close(out.a, a * b)
        torch.testing.assert_close(out.b, a - b)
        pm.destroy()
        with pytest.raises(poptorch.Error, match="ICustomArgParser"):
            poptorch.registerCustomArgParser(Pair, object())
    finally:
        poptorch.registerCustomArgParser(Pair, None)


def _lamb_reference(w, grads, lr, b1, b2, eps, wd, bias_correction):
    """LAMB written out step by step (You et al. 2019, PopTorch's variant) in float64."""
    w = w.double().clone()
    m = torch.zeros_like(w)
    v = torch.zeros_like(w)
    for t, g in enumerate(grads, 1):
        g = g.double()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        c1 = 1 - b1 ** t if bias_correction else 1.0
        c2 = 1 - b2 ** t if bias_correction else 1.0
        u = (m / c1) / (torch.sqrt(v / c2) + eps) + wd * w
        r1, r2 = float(w.norm()), float(u.norm())
        trust = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
        w = w - lr * trust * u
    return w


@pytest.mark.parametrize("cls,bias", [(poptorch.optim.LAMB, True),
                                      (poptorch.optim.LAMBNoBias, False)])
def test_lamb_on_the_host_matches_its_definition(cls, bias):
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(5, 4))
    w0 = w.detach().clone()
    grads = [torch.randn(5, 4) for _ in range(4)]
    opt = cls([w], lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
    for g in grads:
        w.grad = g.clone()
        opt.step()
    ref = _lamb_reference(w0, grads, 0.01, 0.8, 0.95, 1e-6, 0.1, bias)
    torch.testing.assert_close(w.detach().double(), ref, rtol=1e-5, atol=1e-6)
    assert not math.isclose(float(w.detach().sum()), float(w0.sum()))


def test_rmsprop_is_torch_rmsprop_with_poptorch_arguments():
    torch.manual_seed(0)
    a = nn.Linear(3, 2)
    b = copy.deepcopy(a)
    oa = poptorch.optim.RMSprop(a.parameters(), lr=0.01, alpha=0.9, loss_scaling=1.0)
    ob = torch.optim.RMSprop(b.parameters(), lr=0.01, alpha=0.9)
    x = torch.rand(4, 3)
    for o, m in ((oa, a), (ob, b)):
        m(x).sum().backward()
        o.step()
    torch.testing.assert_close(a.weight, b.weight)


def test_optimizers_the_daemon_lacks_are_refused_with_a_sentence(daemon):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return poptorch.identity_loss(self.fc(x), reduction="mean")

    m = M()
    pm = poptorch.trainingModel(m, optimizer=torch.optim.Adagrad(m.parameters()))
    with pytest.raises(poptorch.Error, match=r"the optimizer Adagrad is not one ipuofd runs: "
                       r"use poptorch.optim's \(or torch.optim's\) SGD, Adam, AdamW, RMSprop"):
        pm(torch.rand(4, 3))


def test_output_return_period_ignored_outside_every_n():
    opts = poptorch.Options().outputMode(poptorch.OutputMode.All, output_return_period=5)
    assert opts.output_mode == poptorch.OutputMode.All


def test_inference_with_accumulation_is_poptorch_text():
    opts = poptorch.Options()
    assert isinstance(opts._execution_strategy, poptorch.PipelinedExecution)
    opts.Training.gradientAccumulation(2)
    with pytest.raises(poptorch.poptorch_core.Error,
                       match=r"You must set poptorch\.Options\(\)\.Training\."
                       r"gradientAccumulation to 1 or leave it as its default value \(1\) "
                       r"when running a poptorch\.inferenceModel\(\)\. Use poptorch\."
                       r"Options\(\)\.deviceIterations to process"):
        poptorch.inferenceModel(nn.Linear(2, 2), opts)


def test_variable_attributes():
    w = nn.Parameter(torch.rand(2))
    opt = poptorch.optim.SGD([w], lr=0.1, momentum=0.9)
    va = opt.variable_attrs
    assert not va.isConstant("lr") and not va.isConstant("momentum")
    assert va.isConstant("weight_decay")
    va.markAsConstant("lr")
    assert va.isConstant("lr")
    va.markAsVariable("loss_scaling")
    assert not va.isConstant("loss_scaling")
    with pytest.raises(ValueError, match="Unknown attribute nonsense"):
        va.markAsConstant("nonsense")
    assert poptorch.optim.LAMB([w], lr=0.1).variable_attrs.isConstant("eps")


def test_option_setters_take_poptorch_keyword_names():
    o = poptorch.Options().deviceIterations(device_iterations=3) \
        .replicationFactor(replication_factor=2).randomSeed(random_seed=4) \
        .autoRoundNumIPUs(auto_round_num_ipus=True).logDir(log_dir="/tmp")
    o.Training.gradientAccumulation(gradient_accumulation=5)
    o.Training.accumulationAndReplicationReductionType(
        reduction_type=poptorch.ReductionType.Sum)
    o.TensorLocations.setWeightLocation(location=poptorch.TensorLocationSettings())
    assert (o.device_iterations, o.replication_factor, o.random_seed) == (3, 2, 4)
    assert o.Training.gradient_accumulation == 5


def test_impl_is_dispatch_tracing_keeps_tensors_on_the_cpu(daemon):
    """PopTorch's test helper outputDevice() asks poptorch._impl.isDispatchTracing() whether
    tensors made in forward() need device="ipu" (the attribute was missing: 8 of
    half_float_test.py's tests stopped there). The capture runs on the CPU: False, also
    while capturing, and such a tensor reaches the graph."""
    seen = []

    class M(torch.nn.Module):
        def forward(self, x):
            on_ipu = poptorch.isRunningOnIpu() and poptorch._impl.isDispatchTracing()
            seen.append(on_ipu)
            return torch.ones(2, 3, device="ipu" if on_ipu else None) + x

    x = torch.tensor([1.0, 2.0, 3.0])
    out = poptorch.inferenceModel(M())(x)
    assert torch.equal(out, torch.ones(2, 3) + x)
    assert seen and not any(seen)
