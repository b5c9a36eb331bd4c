"""poptorch.DataLoader's batched path (ipuof/batched.py): for the tutorial's dataset
(torchvision's FashionMNIST read from files prepared from Debian's dataset-fashion-mnist,
ToTensor then Normalize) it yields exactly (torch.equal, same dtypes and types) what the
per-sample path yields, batch by batch over whole epochs: shuffled, in Async mode with
workers, split between two processes (configureProcessId), with drop_last off, through a
Subset and with the global generator's shuffle. Anything it does not recognise (a subclass
that overrides __getitem__, an unknown transform, a target_transform, a collate_fn) takes
the general path, per sample; IPUOF_BATCHED_LOADER=0 turns it off."""
import os

import pytest
import torch
import torch.utils.data as tud
import torchvision
import torchvision.transforms as T

import poptorch
from ipuof import batched


def tutorial_transform():
    return T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])


def fashion(root, train, transform=None, cls=torchvision.datasets.FashionMNIST, **kw):
    return cls(root, train=train, download=False,
               transform=tutorial_transform() if transform is None else transform, **kw)


def epoch(loader, monkeypatch, on, seed=None):
    """One epoch's batches, with the batched path allowed (on) or turned off."""
    monkeypatch.setenv("IPUOF_BATCHED_LOADER", "1" if on else "0")
    assert (batched.plan(loader) is not None) == on
    if seed is not None:
        torch.manual_seed(seed)
    return list(loader)


def assert_identical(got, want):
    """Every batch: the same structure, dtypes, shapes and bits."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w) and len(g) == len(w)
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.is_contiguous() and b.is_contiguous()
            assert torch.equal(a, b)


def tutorial_options(seed=42):
    opts = poptorch.Options()
    opts.randomSeed(seed)
    opts.deviceIterations(10)
    opts.Training.gradientAccumulation(10)
    return opts


def test_tutorial_epoch_identical_async_workers(fashion_root, monkeypatch):
    """The tutorial's training loader (batch 40 x 10 iterations x 10 accumulation,
    shuffle, drop_last, Async with 2 workers): the whole 60 000-sample epoch."""
    ds = fashion(fashion_root, True)
    loader = poptorch.DataLoader(tutorial_options(), ds, batch_size=40, shuffle=True,
                                 drop_last=True, num_workers=2,
                                 mode=poptorch.DataLoaderMode.Async)
    fast = epoch(loader, monkeypatch, True)
    slow = epoch(poptorch.DataLoader(tutorial_options(), ds, batch_size=40, shuffle=True,
                                     drop_last=True, num_workers=2,
                                     mode=poptorch.DataLoaderMode.Async),
                 monkeypatch, False)
    assert len(fast) == 15
    assert_identical(fast, slow)
    labels = torch.cat([b[1] for b in fast])
    assert labels.dtype == torch.int64 and labels.numel() == 60000
    assert torch.equal(torch.sort(labels).values, torch.sort(ds.targets).values)
    # A second epoch of the same loader draws another order, still batched.
    again = epoch(loader, monkeypatch, True)
    assert not torch.equal(again[0][1], fast[0][1])


def test_two_processes_identical_and_disjoint(fashion_root, monkeypatch):
    """configureProcessId(i, 2) on the test split, seeded shuffle, drop_last off (the last
    incomplete global batch shared out): each process's epoch equals its per-sample epoch
    and the two shares never hold the same sample."""
    ds = fashion(fashion_root, False)
    shares = []
    for pid in range(2):
        def make():
            opts = poptorch.Options()
            opts.randomSeed(7)
            opts.deviceIterations(3)
            opts.Distributed.configureProcessId(pid, 2)
            return poptorch.DataLoader(opts, ds, batch_size=7, shuffle=True, drop_last=False)
        fast = epoch(make(), monkeypatch, True)
        slow = epoch(make(), monkeypatch, False)
        assert_identical(fast, slow)
        shares.append(fast)
    # 10 000 = 238 global batches of 42 and 4 samples more, all in process 0's share.
    assert [len(sh) for sh in shares] == [239, 238]
    assert shares[0][-1][0].shape == (4, 1, 28, 28)
    assert sum(b[0].shape[0] for sh in shares for b in sh) == 10000
    # The shares (the indices each process's loader drew) are disjoint and cover the split.
    drawn = []
    for pid in range(2):
        opts = poptorch.Options()
        opts.randomSeed(7)
        opts.deviceIterations(3)
        opts.Distributed.configureProcessId(pid, 2)
        dl = poptorch.DataLoader(opts, ds, batch_size=7, shuffle=True, drop_last=False)
        drawn.append([i for b in dl.batch_sampler for i in b])
        assert torch.equal(torch.cat([b[1] for b in shares[pid]]), ds.targets[drawn[pid]])
    assert not set(drawn[0]) & set(drawn[1])
    assert sorted(drawn[0] + drawn[1]) == list(range(10000))


@pytest.mark.parametrize("transform", [
    T.ToTensor(),
    T.Compose([T.ToTensor()]),
    T.Compose([T.ToTensor(), T.Normalize(0.5, 0.25), T.Normalize([0.1], [2.0], inplace=True)]),
], ids=["ToTensor", "Compose-ToTensor", "two-Normalizes"])
def test_global_shuffle_subset_identical(fashion_root, monkeypatch, transform):
    """No randomSeed: torch's RandomSampler draws from the global generator (after the
    iterator's base seed, as torch's iterators draw it); a Subset of the training split,
    drop_last off, other transforms of the recognised kind."""
    ds = tud.Subset(fashion(fashion_root, True, transform), range(100, 2100))
    opts = poptorch.Options()
    opts.deviceIterations(3)
    loader = poptorch.DataLoader(opts, ds, batch_size=9, shuffle=True, drop_last=False)
    fast = epoch(loader, monkeypatch, True, seed=5)
    slow = epoch(loader, monkeypatch, False, seed=5)
    assert len(fast) == -(-2000 // 27)
    assert_identical(fast, slow)


def test_float64_default_dtype(fashion_root, monkeypatch):
    """ToTensor converts to the default dtype: float64 when the program sets it."""
    ds = tud.Subset(fashion(fashion_root, False), list(range(500)))
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        loader = poptorch.DataLoader(poptorch.Options(), ds, batch_size=64)
        fast = epoch(loader, monkeypatch, True)
        slow = epoch(loader, monkeypatch, False)
    finally:
        torch.set_default_dtype(old)
    assert fast[0][0].dtype == torch.float64
    assert_identical(fast, slow)


def test_unmappable_indices_fall_back_per_sample(fashion_root):
    """Indices the batched gather cannot take (negative, numpy integers) are fetched per
    sample, with the per-sample results."""
    ds = fashion(fashion_root, False)
    f = batched.plan(poptorch.DataLoader(poptorch.Options(), ds, batch_size=4))
    import numpy as np
    for idx in ([-1, 3, 5, -2], [np.int64(4), np.int64(9)], [0, 1, 2, 3]):
        want = tud.default_collate([ds[i] for i in idx])
        assert_identical([f.fetch(idx)], [want])
    with pytest.raises(IndexError):
        f.fetch([0, 10000])


class FashionFiles(torchvision.datasets.FashionMNIST):
    """FashionMNIST's files under a subclass's name (torchvision looks in ROOT/<class>)."""

    @property
    def raw_folder(self):
        return os.path.join(self.root, "FashionMNIST", "raw")


class CountingFashion(FashionFiles):
    """Overrides __getitem__ (and counts its calls): not MNIST's own any more."""
    calls = 0

    def __getitem__(self, i):
        CountingFashion.calls += 1
        img, target = super().__getitem__(i)
        return img + 1.0, target


class PlainSubclass(FashionFiles):
    """A subclass that keeps MNIST's __getitem__: still recognised."""


class CountingTransform:
    """An unknown transform: ToTensor, times 2, counting its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, img):
        self.calls += 1
        return T.functional.to_tensor(img) * 2


def test_subclass_overriding_getitem_takes_general_path(fashion_root, monkeypatch):
    monkeypatch.delenv("IPUOF_BATCHED_LOADER", raising=False)
    ds = fashion(fashion_root, False, cls=CountingFashion)
    loader = poptorch.DataLoader(poptorch.Options(), tud.Subset(ds, range(300)),
                                 batch_size=100)
    assert batched.plan(loader) is None
    CountingFashion.calls = 0
    got = list(loader)
    assert CountingFashion.calls == 300
    base = fashion(fashion_root, False)
    want = tud.default_collate([base[i] for i in range(100)])
    assert torch.equal(got[0][0], want[0] + 1.0)
    # Keeping MNIST's own __getitem__ keeps the batched path.
    keep = poptorch.DataLoader(poptorch.Options(), fashion(fashion_root, False,
                                                           cls=PlainSubclass), batch_size=100)
    assert batched.plan(keep) is not None


def test_unknown_transform_takes_general_path(fashion_root, monkeypatch):
    monkeypatch.delenv("IPUOF_BATCHED_LOADER", raising=False)
    tf = CountingTransform()
    ds = tud.Subset(fashion(fashion_root, False, tf), range(200))
    loader = poptorch.DataLoader(poptorch.Options(), ds, batch_size=50)
    assert batched.plan(loader) is None
    got = list(loader)
    assert tf.calls == 200
    raw = fashion(fashion_root, False).data[:50].unsqueeze(1).float() / 255
    assert torch.equal(got[0][0], raw * 2)
    # Nor: a Compose with the unknown transform in it, a Normalize subclass, a Normalize
    # of three channels on one-channel images (the per-sample path's error), a zero std,
    # a target_transform, a collate_fn of the user's.

    class MyNormalize(T.Normalize):
        pass

    for transform, kw, lkw in (
            (T.Compose([T.ToTensor(), tf]), {}, {}),
            (T.Compose([T.ToTensor(), MyNormalize((0.1,), (0.3,))]), {}, {}),
            (T.Compose([T.ToTensor(), T.Normalize((0.1, 0.2, 0.3), (1, 1, 1))]), {}, {}),
            (T.Compose([T.ToTensor(), T.Normalize((0.1,), (0.0,))]), {}, {}),
            (T.Compose([T.Normalize((0.1,), (0.3,)), T.ToTensor()]), {}, {}),
            (None, {"target_transform": lambda t: t + 1}, {}),
            (None, {}, {"collate_fn": lambda b: tud.default_collate(b)})):
        d = fashion(fashion_root, False, transform, **kw)
        dl = poptorch.DataLoader(poptorch.Options(), d, batch_size=10, **lkw)
        assert batched.plan(dl) is None, (transform, kw, lkw)
    with pytest.raises(ValueError, match="std evaluated to zero"):
        next(iter(poptorch.DataLoader(
            poptorch.Options(),
            fashion(fashion_root, False, T.Compose([T.ToTensor(), T.Normalize(0.1, 0.0)])),
            batch_size=10)))


def test_switch_off(fashion_root, monkeypatch):
    """IPUOF_BATCHED_LOADER=0 (or off, no, false) turns the batched path off."""
    loader = poptorch.DataLoader(poptorch.Options(), fashion(fashion_root, False),
                                 batch_size=10)
    for v in ("0", "off", "No", "false"):
        monkeypatch.setenv("IPUOF_BATCHED_LOADER", v)
        assert batched.plan(loader) is None
    for v in ("1", "on"):
        monkeypatch.setenv("IPUOF_BATCHED_LOADER", v)
        assert batched.plan(loader) is not None
    monkeypatch.delenv("IPUOF_BATCHED_LOADER")
    assert batched.plan(loader) is not None
    # The rebatching mode (single samples from the workers) keeps the general path.
    rebatched = poptorch.DataLoader(poptorch.Options(), fashion(fashion_root, False),
                                    batch_size=10, mode=poptorch.DataLoaderMode.AsyncRebatched)
    assert batched.plan(rebatched) is None


def test_import_poptorch_does_not_import_torchvision():
    """The batched path recognises torchvision's classes from the modules the program has
    imported: importing poptorch alone leaves torchvision unimported (it was 2.3 s of
    the 12.8 s import at a load of 15; PopTorch's pipelining_test gives a `python3`
    subprocess that imports poptorch 10 s)."""
    import subprocess
    import sys
    code = "import sys, poptorch; print('torchvision' in sys.modules)"
    package = os.path.dirname(os.path.dirname(batched.__file__))
    env = dict(os.environ, PYTHONPATH=package)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    assert out.stdout.strip() == "False", out.stderr
