"""Automatic loss scaling (Options.Training.setAutomaticLossScaling), as PopART defines it,
run by the daemon's optimizer step: after each step the trained gradients, scaled by the
step's loss scale as float16 values, are counted against a bin edge at 0.125 x 65504; more
than 1e-7 of them at or above it (overflows included) halves the loss scale, otherwise it
doubles, within float16's range. The loss scale of a step is anchored as finalLossScale;
the factor is ipu_state's lossScaleUpdateFactor. Exact: the scales are powers of two."""
import pytest
import torch

import poptorch


class Scaled(torch.nn.Module):
    """loss = k * sum(w * x): the gradient of w is k * x, whatever w is (lr 0 keeps w)."""

    def __init__(self, k):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))
        self.k = k

    def forward(self, x):
        return poptorch.identity_loss(self.k * (self.w * x).sum(), reduction="sum")


def run(k, initial_ls, steps=5, half=True, optim=poptorch.optim.SGD):
    model = Scaled(k)
    if half:
        model.half()
    opts = poptorch.Options()
    opts.Training.setAutomaticLossScaling(True)
    opts.anchorTensor("ls", "finalLossScale", poptorch.OutputMode.Final)
    opt = optim(model.parameters(), lr=0.0, loss_scaling=initial_ls)
    pm = poptorch.trainingModel(model, opts, opt)
    x = torch.ones(4, dtype=torch.float16 if half else torch.float32)
    pm.compile(x)
    seen = []
    for _ in range(steps):
        factor = float(opt.state_dict()["ipu_state"]["lossScaleUpdateFactor"])
        pm(x)
        final = float(pm.getAnchoredTensor("ls"))
        assert final == initial_ls * factor     # the step used the factor read before it
        seen.append(final)
    pm.destroy()
    return seen


@pytest.mark.parametrize("optim", [poptorch.optim.SGD, poptorch.optim.Adam,
                                   poptorch.optim.LAMB])
def test_small_gradients_double_the_scale(daemon, optim):
    # gradient 1 per element: 1 x scale stays far below 0.125 x 65504
    assert run(1.0, 2.0, optim=optim) == [2.0, 4.0, 8.0, 16.0, 32.0]


def test_gradients_above_the_edge_halve_the_scale(daemon):
    # gradient 1000: 1000 x 16 = 16000 >= 8188 halves; 1000 x 8 = 8000 < 8188 doubles
    assert run(1000.0, 16.0) == [16.0, 8.0, 16.0, 8.0, 16.0]
    # overflowing float16 (1000 x 128 > 65504) halves too, step after step
    assert run(1000.0, 128.0, steps=4) == [128.0, 64.0, 32.0, 16.0]


def test_scale_stays_within_float16(daemon):
    # gradient 1/64: never near the edge; 65536 would pass 65504, so the scale stays
    seen = run(1.0 / 64, 16384.0, steps=4)
    assert seen == [16384.0, 32768.0, 32768.0, 32768.0]


def test_float32_parameters_refused(daemon):
    with pytest.raises(poptorch.Error, match="setAutomaticLossScaling.*not float16"):
        run(1.0, 2.0, half=False)


def test_without_automatic_scaling_the_scale_is_constant(daemon):
    model = Scaled(1.0).half()
    opts = poptorch.Options()
    opts.anchorTensor("ls", "finalLossScale", poptorch.OutputMode.Final)
    pm = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.0,
                                                                loss_scaling=4.0))
    x = torch.ones(4, dtype=torch.float16)
    for _ in range(3):
        pm(x)
        assert float(pm.getAnchoredTensor("ls")) == 4.0
    pm.destroy()
