"""Graphcore's published training configurations (bench/published_models.py) on simulated
IPUs, as on hardware (issue 27, item 5):
- ResNet-50 at configs.yml `resnet50` (micro-batch 18, 16.16, half partials, stochastic
  rounding, loss scaling 128, SGD with momentum, the listed recomputation checkpoints,
  memory proportion 0.16), one IPU per replica: trains two steps at gradient
  accumulation 2 (one replica here: a replica's memory is the same at 16);
- BERT-Base pretrain_base_128 (micro-batch 32, 4-IPU pipeline [0,4,4,4], a checkpoint per
  layer, AutoIncrement's 15 stages): compiles on 4 IPUs and runs a call, at gradient
  accumulation 29 (the least a pipeline of 15 stages accepts; 512 is published);
- the counter-check: each at twice the published micro-batch without recomputation is
  refused, naming the IPU and the shortfall, as the hardware's compiler would.
`make test-published` runs them (minutes each: full-size models on two cores)."""
import re
import warnings

import pytest
import torch

import poptorch
import published_models as P

_made = []


@pytest.fixture(autouse=True)
def _cleanup():
    """Warnings off; each model made is destroyed after its test, passed or failed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    while _made:
        _made.pop().destroy()


def _train(model, opts, optimizer):
    _made.append(poptorch.trainingModel(model, opts, optimizer))
    return _made[-1]


def _refused_short(pm, batch):
    """The compile's refusal: Error naming IPU 0's need and its shortfall ("2.00 GiB
    short"); returns the shortfall in bytes."""
    with pytest.raises(poptorch.Error) as info:
        pm.compile(*batch)
    text = str(info.value)
    assert re.search(r"does not fit: IPU 0 .*needs \d+ bytes", text), text
    short = re.search(r"([\d.]+) (B|KiB|MiB|GiB) short", text)
    assert short, text
    unit = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[short.group(2)]
    return float(short.group(1)) * unit


def _memory(pm, what):
    """Prints the memory plan's figures of each IPU pm occupies (docs/memory.md records
    them; `pytest -s` shows them) and checks that each fits its IPU."""
    rows = pm._exe.memory()
    assert rows, "the client library reports no memory figures"
    mib = 1 << 20
    for r in rows:
        print(f"\n  {what} IPU {r['ipu']}: total {r['total'] / mib:.1f} MiB of "
              f"{r['capacity'] / mib:.1f} (weights {r['weights'] / mib:.1f}, activations "
              f"{r['activations'] / mib:.1f}, code {r['code'] / mib:.1f}, gradients "
              f"{r['gradients'] / mib:.1f}, optimizer {r['optimizer'] / mib:.1f}, stash "
              f"{r['stash'] / mib:.1f}; off chip {r['offchip'] / mib:.1f})", end="")
        assert r["total"] <= r["capacity"], r
    print()
    return rows


def test_resnet50_published_configuration_trains(daemon):
    """ResNet-50 at its published configuration fits one IPU and trains two steps: the
    loss is finite and every convolution's weights move."""
    model, opts, opt, (images, labels) = P.resnet50_config(
        micro_batch=18, gradient_accumulation=2, replicas=1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    pm = _train(model, opts, opt)
    pm.compile(images, labels)
    assert len(_memory(pm, "ResNet-50 micro-batch 18")) == 1
    losses = []
    for _ in range(2):
        _, loss = pm(images, labels)
        losses.append(float(loss.float().mean()))
    assert all(torch.isfinite(torch.tensor(losses))), losses
    pm.copyWeightsToHost()
    convs = [n for n, p in model.named_parameters() if p.dim() == 4]
    assert len(convs) == 53
    moved = [n for n in convs if not torch.equal(before[n], dict(model.named_parameters())[n])]
    assert moved == convs


def test_resnet50_twice_the_batch_without_recomputation_is_refused(daemon):
    """Micro-batch 36 with no recomputation does not fit one IPU: refused with IPU 0's
    need and the shortfall."""
    model, opts, opt, batch = P.resnet50_config(micro_batch=36, gradient_accumulation=1,
                                                replicas=1, recompute=False)
    # measured: needs 3 093 404 444 bytes (activations 2 883 671 716) of 943 718 400,
    # 2.00 GiB short
    assert _refused_short(_train(model, opts, opt), batch) > 1 << 30


def test_bert_base_phase1_compiles_on_4_ipus_and_runs(daemon):
    """BERT-Base phase 1 at micro-batch 32 compiles over 4 IPUs (embeddings, pooler and
    heads on IPU 0, four layers on each of IPUs 1-3) and runs one call: finite losses,
    MLM near ln(30522) at initialisation."""
    model, opts, opt, batch = P.bert_base_128_config(micro_batch=32,
                                                     gradient_accumulation=29, replicas=1)
    pm = _train(model, opts, opt)
    pm.compile(*batch)
    ipus = {}
    for prefix, _, ipu in pm._placement_opts["blocks"]:
        m = re.match(r"/bert/encoder/layer\.(\d+)/", prefix)
        if m:
            ipus[int(m.group(1))] = ipu
    assert ipus == {i: 1 + i // 4 for i in range(12)}
    assert len(_memory(pm, "BERT-Base phase 1 micro-batch 32")) == 4
    total, mlm, nsp = pm(*batch)
    assert torch.isfinite(total.float()).all() and torch.isfinite(mlm.float()).all()


def test_bert_base_twice_the_batch_without_recomputation_is_refused(daemon):
    """Micro-batch 64 without checkpoints and with recomputation off is refused with the
    shortfall of the IPU that does not fit."""
    model, opts, opt, batch = P.bert_base_128_config(micro_batch=64,
                                                     gradient_accumulation=29, replicas=1,
                                                     recompute=False)
    pm = _train(model, opts, opt)
    with pytest.raises(poptorch.Error, match=r"does not fit: IPU \d .*(B|KiB|MiB|GiB) short"):
        pm.compile(*batch)
