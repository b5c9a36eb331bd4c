"""The batched path of poptorch.DataLoader: whole batches of a torchvision MNIST-family
dataset computed at once, bit for bit what the per-sample path yields.

Per sample, torchvision's MNIST.__getitem__ makes a PIL image of one uint8 row of `data`,
runs the transform on it (ToTensor: the HxW bytes as a (1, H, W) tensor of the default
float dtype divided by 255; Normalize: minus mean, divided by std, one value per channel)
and returns it with int(targets[i]); default_collate stacks the images and makes an int64
tensor of the targets. For a dataset whose class keeps MNIST's own __getitem__ (MNIST,
FashionMNIST, KMNIST, EMNIST; not QMNIST, not a subclass that overrides it), whose `data`
is a 3-D uint8 tensor and `targets` an integer tensor, whose transform is ToTensor or a
Compose of ToTensor followed by Normalizes of one value each (the exact torchvision
classes) and whose target_transform is None, possibly seen through torch's Subset, the
same elementwise float operations over the whole batch give the same bits: gathering
rows, converting uint8 to float, dividing by 255, subtracting and dividing by a one-value
tensor do not depend on the batch size. A loader with its own collate_fn, a
worker_init_fn, pinned memory or rebatching, and anything not recognised, takes the
general path (torch's, per sample, in worker processes). IPUOF_BATCHED_LOADER=0 in the
environment turns the batched path off; it is looked at each time an epoch starts.

The batched path runs in the loader's own process (the Async modes' background thread):
a 4000-sample batch of 28x28 images costs a few milliseconds, less than handing it over
from a worker process would.
"""
import os
import sys

import torch
import torch.utils.data as tud


def _torchvision():
    """(torchvision.datasets.mnist, torchvision.transforms) as the program has imported
    them, else (None, None): a dataset or transform of theirs exists only once they are,
    so importing poptorch does not import torchvision (2.3 of import poptorch's 12.8 s at
    a load of 15, python3 -X importtime)."""
    return (sys.modules.get("torchvision.datasets.mnist"),
            sys.modules.get("torchvision.transforms"))

ENV = "IPUOF_BATCHED_LOADER"

_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def enabled():
    """False when IPUOF_BATCHED_LOADER is "0" (or "off", "no", "false")."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def _one_value(values, dtype):
    """The tensor Normalize makes of mean or std (torch.as_tensor, viewed (-1, 1, 1) when
    1-D), or None unless it holds exactly one value (so it broadcasts over one channel
    the same way per sample and per batch)."""
    try:
        t = torch.as_tensor(values, dtype=dtype)
    except (TypeError, ValueError, RuntimeError):
        return None
    if t.numel() != 1 or t.dim() > 1:
        return None
    return t.view(-1, 1, 1) if t.dim() == 1 else t


def _normalize_steps(transform):
    """The Normalize (mean, std) pairs after ToTensor when transform is ToTensor or a
    Compose of ToTensor then one-value Normalizes; None otherwise."""
    T = _torchvision()[1]
    if T is None:
        return None
    if type(transform) is T.ToTensor:
        return []
    if type(transform) is not T.Compose:
        return None
    steps = list(getattr(transform, "transforms", None) or [])
    if not steps or type(steps[0]) is not T.ToTensor:
        return None
    out = []
    for t in steps[1:]:
        if type(t) is not T.Normalize:
            return None
        out.append((t.mean, t.std))
    return out


def _index_maps(dataset):
    """(base dataset, [index tensors of the Subsets in the way, outermost first]); the
    indices must be integers (anything else leaves the general path to complain)."""
    maps = []
    while type(dataset) is tud.Subset:
        try:
            idx = torch.as_tensor(dataset.indices)
        except (TypeError, ValueError, RuntimeError):
            return None, None
        if idx.dtype not in _INT_DTYPES or idx.dim() != 1:
            return None, None
        maps.append(idx.to(torch.int64))
        dataset = dataset.dataset
    return dataset, maps


class Fetcher:
    """fetch(indices) -> [images, targets] as default_collate would stack the per-sample
    results of dataset[i] for i in indices; indices it cannot map (not plain ints, out of
    range, negative) are fetched per sample instead. Built by plan()."""

    def __init__(self, dataset, base, maps, steps, dtype):
        self.dataset = dataset      # what the loader indexes (base or Subsets of it)
        self.base = base            # the MNIST-family dataset
        self.maps = maps            # Subset index tensors, outermost first
        self.steps = steps          # [(mean, std)] tensors of the Normalizes, in order
        self.dtype = dtype          # ToTensor's float dtype (the default when planned)

    def _general(self, indices):
        return tud.default_collate([self.dataset[i] for i in indices])

    def fetch(self, indices):
        """The collated batch of the samples at indices (a list of ints)."""
        if not indices or any(type(i) is not int for i in indices):
            return self._general(indices)
        idx = torch.tensor(indices, dtype=torch.int64)
        for m in self.maps:
            if int(idx.min()) < 0 or int(idx.max()) >= m.numel():
                return self._general(indices)
            idx = m.index_select(0, idx)
        data, targets = self.base.data, self.base.targets
        if int(idx.min()) < 0 or int(idx.max()) >= data.shape[0] or \
                int(idx.max()) >= targets.shape[0]:
            return self._general(indices)
        # ToTensor: uint8 HxW -> (1, H, W) float, divided by 255 (a Python int, as there).
        images = data.index_select(0, idx).unsqueeze(1).to(dtype=self.dtype).div(255)
        for mean, std in self.steps:    # Normalize: tensor.sub_(mean).div_(std)
            images.sub_(mean).div_(std)
        return [images, targets.index_select(0, idx).to(torch.int64)]


def plan(loader):
    """A Fetcher for loader's batches when the batched path reproduces them exactly (see
    the module's comment), else None. loader is a torch DataLoader with a batch sampler."""
    _tv_mnist = _torchvision()[0]
    if _tv_mnist is None or not enabled():
        return None
    if loader.batch_sampler is None or loader.collate_fn is not tud.default_collate:
        return None
    if loader.worker_init_fn is not None or loader.pin_memory:
        return None
    base, maps = _index_maps(loader.dataset)
    if base is None or not isinstance(base, _tv_mnist.MNIST):
        return None
    if type(base).__getitem__ is not _tv_mnist.MNIST.__getitem__:
        return None
    data = getattr(base, "data", None)
    targets = getattr(base, "targets", None)
    if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8 or data.dim() != 3:
        return None
    if not isinstance(targets, torch.Tensor) or targets.dtype not in _INT_DTYPES or \
            targets.dim() != 1:
        return None
    if base.target_transform is not None or data.device.type != "cpu" or \
            targets.device.type != "cpu":
        return None
    steps = _normalize_steps(base.transform)
    if steps is None:
        return None
    dtype = torch.get_default_dtype()
    tensors = []
    for mean, std in steps:
        m, s = _one_value(mean, dtype), _one_value(std, dtype)
        if m is None or s is None or bool((s == 0).any()):
            return None     # the general path raises Normalize's own error
        tensors.append((m, s))
    return Fetcher(loader.dataset, base, maps, tensors, dtype)


class BatchedIter:
    """An epoch of loader through fetcher: what torch's iterator yields, in the same order
    (the batch sampler's), drawing from the loader's generator as torch's iterator does
    when it starts (its workers' base seed), so a shuffle that draws from the global
    generator draws the same order on both paths."""

    def __init__(self, loader, fetcher):
        self._fetcher = fetcher
        self._sampler_iter = iter(loader.batch_sampler)
        self._len = len(loader.batch_sampler)
        torch.empty((), dtype=torch.int64).random_(generator=loader.generator)

    def __iter__(self):
        return self

    def __next__(self):
        return self._fetcher.fetch(next(self._sampler_iter))

    def __len__(self):
        return self._len
