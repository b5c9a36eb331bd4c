"""poptorch.DataLoader and AsynchronousDataAccessor: the combined batch, the per-process
shares under configureProcessId, the Async mode of listing 5.1 and rebatching (003,
5.2.1: 100 samples over 7 workers, batch 4)."""
import math

import pytest
import torch

import poptorch
from models import ExampleDataset, ExampleModelWithLoss


class Numbers(torch.utils.data.Dataset):
    """Item i is (tensor([i]) float, i)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([float(i)]), i


class IterNumbers(torch.utils.data.IterableDataset):
    """0..n-1, split between DataLoader workers as PyTorch's documentation does: worker w
    of W takes a contiguous range of ceil(n / W) items."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is None:
            lo, hi = 0, self.n
        else:
            per = math.ceil(self.n / info.num_workers)
            lo = info.id * per
            hi = min(self.n, lo + per)
        for i in range(lo, hi):
            yield torch.tensor([float(i)]), i


def test_combined_batch_size():
    opts = poptorch.Options()
    opts.deviceIterations(3)
    opts.replicationFactor(2)
    opts.Training.gradientAccumulation(5)
    dl = poptorch.DataLoader(opts, Numbers(200), batch_size=4)
    assert dl.combinedBatchSize == 4 * 3 * 5 * 2
    batches = list(dl)
    assert len(batches) == len(dl) == 200 // 120
    assert batches[0][0].shape == (120, 1)
    # inputReplicaGrouping: replicas of a group share one input. The loader froze opts
    # (PopTorch's rule): a copy takes the change.
    with pytest.raises(poptorch.Error, match="frozen"):
        opts.inputReplicaGrouping(2, poptorch.CommGroupType.Consecutive)
    opts = opts.clone()
    opts.inputReplicaGrouping(2, poptorch.CommGroupType.Consecutive)
    assert poptorch.DataLoader(opts, Numbers(200), batch_size=4).combinedBatchSize == 60


def test_process_shares_are_disjoint_and_seeded():
    seen = []
    for pid in range(3):
        opts = poptorch.Options()
        opts.deviceIterations(2)
        opts.randomSeed(11)
        opts.Distributed.configureProcessId(pid, 3)
        dl = poptorch.DataLoader(opts, Numbers(100), batch_size=5, shuffle=True)
        assert dl.combinedBatchSize == 10
        epoch = [int(i) for _, labels in dl for i in labels]
        assert len(dl) == 3 and len(epoch) == 30  # floor(100 / 30) global batches
        seen.append(epoch)
    # The three processes together use 90 distinct samples: no sample twice.
    assert len(set(seen[0]) | set(seen[1]) | set(seen[2])) == 90
    # The same seed gives the same shares again; another epoch another order.
    opts = poptorch.Options()
    opts.deviceIterations(2)
    opts.randomSeed(11)
    opts.Distributed.configureProcessId(1, 3)
    dl = poptorch.DataLoader(opts, Numbers(100), batch_size=5, shuffle=True)
    first = [int(i) for _, labels in dl for i in labels]
    second = [int(i) for _, labels in dl for i in labels]
    assert first == seen[1]
    assert first != second


def test_process_share_layout_is_that_of_one_process_with_all_replicas():
    """Process p's batch holds, for each (device iteration, accumulation step), the rows of
    its replicas in the global layout [D][A][R_global][B]."""
    opts = poptorch.Options()
    opts.deviceIterations(2)
    opts.Distributed.configureProcessId(1, 3)
    dl = poptorch.DataLoader(opts, Numbers(60), batch_size=5, shuffle=False)
    labels = [int(i) for i in next(iter(dl))[1]]
    assert labels == list(range(5, 10)) + list(range(20, 25))


def test_distributed_shuffle_needs_a_seed():
    opts = poptorch.Options()
    opts.Distributed.configureProcessId(0, 2)
    with pytest.raises(poptorch.Error, match="randomSeed"):
        poptorch.DataLoader(opts, Numbers(100), batch_size=5, shuffle=True)


def test_async_loader_listing_5_1(daemon):
    """Listing 5.1: an inference model fed by an Async DataLoader; the outputs equal the
    host model's over the whole dataset."""
    opts = poptorch.Options()
    opts.deviceIterations(4)
    opts.replicationFactor(2)
    loader = poptorch.DataLoader(opts, ExampleDataset(shape=[3, 2], length=96),
                                 batch_size=3, num_workers=2,
                                 mode=poptorch.DataLoaderMode.Async)
    torch.manual_seed(2)
    model = ExampleModelWithLoss([3, 2], 2)
    pm = poptorch.inferenceModel(model, opts)
    n = 0
    for it, (data, _) in enumerate(loader):
        out = pm(data)
        assert out.shape == (24, 2)
        with torch.no_grad():
            assert torch.allclose(out, model(data), rtol=1e-4, atol=1e-6)
        n += 1
    assert n == 4
    # A second epoch over the same loader works, and stopping early does not hang.
    for it, (data, _) in enumerate(loader):
        break
    assert sum(1 for _ in loader) == 4
    pm.destroy()


def test_accessor_reports_dataset_errors():
    class Broken(Numbers):
        def __getitem__(self, i):
            if i == 7:
                raise ValueError("item 7 is broken")
            return super().__getitem__(i)

    acc = poptorch.AsynchronousDataAccessor(
        torch.utils.data.DataLoader(Broken(20), batch_size=4))
    with pytest.raises(ValueError, match="item 7 is broken"):
        list(acc)


def test_rebatching_uses_all_samples():
    """003, 5.2.1: 100 samples of an iterable dataset over 7 workers in batches of 4: the
    plain loader drops each worker's incomplete batch (80 used), AsyncRebatched uses all
    100."""
    opts = poptorch.Options()
    plain = poptorch.DataLoader(opts, IterNumbers(100), batch_size=4, num_workers=7,
                                drop_last=True)
    used = [int(i) for _, labels in plain for i in labels]
    assert len(used) == 80
    rebatched = poptorch.DataLoader(opts, IterNumbers(100), batch_size=4, num_workers=7,
                                    mode=poptorch.DataLoaderMode.AsyncRebatched)
    batches = list(rebatched)
    assert all(b[0].shape == (4, 1) for b in batches)
    used = sorted(int(i) for _, labels in batches for i in labels)
    assert used == list(range(100))


def test_user_batch_sampler_batches_are_combined():
    """A batch_sampler of the program's own: deviceIterations of its batches in a row make
    one combined batch (PopTorch's rule), the last one shorter unless drop_last."""
    import torch.utils.data as tud

    class Rows(tud.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return torch.tensor([float(i)]), {"i": torch.tensor(i)}

    class Uneven:
        batch_size = 2

        def __iter__(self):
            yield from ([0, 1], [2, 3, 4], [5], [6, 7], [8, 9])

        def __len__(self):
            return 5

    opts = poptorch.Options().deviceIterations(2)
    for drop_last, want in ((True, [[0, 1, 2, 3, 4], [5, 6, 7]]),
                            (False, [[0, 1, 2, 3, 4], [5, 6, 7], [8, 9]])):
        loader = poptorch.DataLoader(opts, Rows(), batch_sampler=Uneven(),
                                     drop_last=drop_last)
        got = list(loader)
        assert len(loader) == len(want)
        assert [b[0].flatten().tolist() for b in got] == [[float(i) for i in w] for w in want]
        assert [b[1]["i"].tolist() for b in got] == want
    with pytest.raises(poptorch.Error, match="mutually exclusive with batch_size"):
        poptorch.DataLoader(opts, Rows(), batch_size=2, batch_sampler=Uneven())


def test_async_rebatched_keeps_the_last_batch_without_drop_last():
    import torch.utils.data as tud

    class Rows(tud.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return torch.tensor([float(i)])

    opts = poptorch.Options()
    for drop_last, want in ((True, 8), (False, 10)):
        loader = poptorch.DataLoader(opts, Rows(), batch_size=4, drop_last=drop_last,
                                     mode=poptorch.DataLoaderMode.AsyncRebatched)
        seen = sorted(int(v) for b in loader for v in b.flatten())
        assert len(seen) == want and len(set(seen)) == want
        assert len(loader) == (2 if drop_last else 3)
        loader.terminate()
