"""poptorch.DataLoader and AsynchronousDataAccessor as PopTorch has them: batch_size=None
(the dataset's items as they are) and an accessor that fails when it is made, not later,
when its dataset cannot give a first batch."""
import pytest
import torch

import poptorch


class Counting(torch.utils.data.IterableDataset):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield torch.full((2, 3), float(i))


class CountingWithLen(Counting):
    def __len__(self):
        return self.n


class Broken(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, index):
        raise AssertionError("Broken dataset")


@pytest.mark.parametrize("mode", [poptorch.DataLoaderMode.Sync,
                                  poptorch.DataLoaderMode.Async])
def test_batch_size_none_gives_the_items_as_they_are(mode):
    loader = poptorch.DataLoader(poptorch.Options(), Counting(5), batch_size=None,
                                 num_workers=1, mode=mode)
    assert loader.combinedBatchSize is None
    for _ in range(2):  # two epochs
        items = list(loader)
        assert [t.shape for t in items] == [torch.Size([2, 3])] * 5
        assert [t[0, 0].item() for t in items] == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(TypeError, match="'Counting' has no len()"):
        len(loader)
    assert len(poptorch.DataLoader(poptorch.Options(), CountingWithLen(5),
                                   batch_size=None, mode=mode)) == 5
    loader.terminate()


def test_batch_size_none_is_refused_with_the_automatic_process_split():
    opts = poptorch.Options()
    opts.Distributed.configureProcessId(0, 2)
    with pytest.raises(poptorch.Error, match="batch_size=None not allowed when using "
                                             "auto_distributed_partitioning"):
        poptorch.DataLoader(opts, CountingWithLen(4), batch_size=None)


def test_accessor_of_a_broken_dataset_fails_when_made(capsys):
    loader = poptorch.DataLoader(poptorch.Options(), Broken(), batch_size=1, num_workers=2)
    with pytest.raises(poptorch.Error, match="worker thread failed to start") as info:
        poptorch.AsynchronousDataAccessor(loader)
    assert "Broken dataset" in str(info.value.__cause__)
    # the worker's failure is logged with its traceback, as PopTorch's worker does
    assert "AssertionError: Broken dataset" in capsys.readouterr().err


def test_accessor_starts_loading_when_made():
    seen = []

    class Recording(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            seen.append(i)
            return torch.tensor([float(i)])

    loader = poptorch.DataLoader(poptorch.Options(), Recording(), batch_size=1)
    acc = poptorch.AsynchronousDataAccessor(loader, buffer_size=1)
    assert seen  # the first batch was made before any iteration
    assert [t.item() for t in acc] == [0.0, 1.0, 2.0, 3.0]
    assert [t.item() for t in acc] == [0.0, 1.0, 2.0, 3.0]  # a second epoch
    assert len(acc) == 4
    acc.terminate()
