"""The simulated clock's prediction from Python (issue 28; docs/cost-model.md): after
model.compile(...) ipuofPrediction() gives the compile's prediction as a dict and
ipuofPredictionReport() as text, with no run; the figures' arithmetic holds; numIOTiles and
synthetic data reach the clock; getPerfCounters() keeps PopTorch's meaning (no run: empty)."""
import pytest
import torch

import poptorch


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


def _predict(opts):
    pm = poptorch.inferenceModel(_model(), opts)
    pm.compile(torch.zeros(16 * 8, 1, 28, 28))
    p, text = pm.ipuofPrediction(), pm.ipuofPredictionReport()
    pm.destroy()
    return p, text


def test_prediction_after_compile(daemon):
    p, text = _predict(poptorch.Options().deviceIterations(8))
    assert p["samples_per_step"] == 16 * 8
    assert p["samples_per_s"] * p["step_seconds"] == pytest.approx(16 * 8, rel=1e-12)
    parts = p["parts"]
    assert set(parts) == {"compute", "exchange", "sync", "host_io", "collectives"}
    assert sum(parts.values()) <= p["step_seconds"] * (1 + 1e-12)
    assert parts["collectives"] == 0 and parts["host_io"] > 0
    assert p["ipu_type"] in ("gc200", "bow") and p["clock_hz"] > 1e9
    assert "%.1f samples/s" % p["samples_per_s"] in text
    assert p["op_class"] == "Gemm"


def test_io_tiles_and_synthetic_data_reach_the_clock(daemon):
    base, _ = _predict(poptorch.Options().deviceIterations(8))
    syn, _ = _predict(poptorch.Options().deviceIterations(8).enableSyntheticData(True))
    o = poptorch.Options().deviceIterations(8)
    o.TensorLocations.numIOTiles(32)
    io, _ = _predict(o)
    assert syn["parts"]["host_io"] < base["parts"]["host_io"]
    assert io["step_seconds"] < base["step_seconds"]


def test_prediction_needs_a_compile(daemon):
    pm = poptorch.inferenceModel(_model(), poptorch.Options())
    with pytest.raises(poptorch.Error, match="compile the model first"):
        pm.ipuofPrediction()
