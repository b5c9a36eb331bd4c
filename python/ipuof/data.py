"""poptorch.DataLoader and poptorch.AsynchronousDataAccessor.

DataLoader is a torch.utils.data.DataLoader whose batches are PopTorch's combined batch,
B x deviceIterations x gradientAccumulation x (replicationFactor / inputGroupSize)
samples, so one batch feeds one call of a model. Under Distributed.configureProcessId(i, n)
every process draws the same seeded order of the whole dataset, and process i takes the
i-th of n equal shares of every global batch, so the processes never see the same sample
in an epoch. In the Async modes an AsynchronousDataAccessor prepares the next batches in
a background thread while the model runs (the library call releases the GIL); in
AsyncRebatched mode the underlying loader yields single samples and the accessor builds
the combined batches itself, so an iterable dataset split over workers loses at most one
incomplete batch in all (PopTorch's rebatching). Batches of a torchvision MNIST-family
dataset with ToTensor / Normalize transforms are computed whole (batched.py: the same
bits, without a PIL image and two transforms per sample in worker processes), unless
IPUOF_BATCHED_LOADER=0.
"""
import queue
import threading
import traceback

import torch
import torch.utils.data as tud

from . import batched, enums
from ._logging import logger
from .errors import Error


def _combined(options, batch_size):
    """Samples per call in this process."""
    repl = options.replication_factor // options.input_group_size
    return batch_size * options.device_iterations * \
        options.Training.gradient_accumulation * repl


class _ShareSampler(tud.Sampler):
    """Batches of process process_id: the same (seeded) order of all the indices in every
    process, cut into global batches of local x num_processes samples laid out as one
    process with all the replicas would lay them out, [steps][processes][rows]; this process
    takes its rows of each step (its replicas' micro-batches). Incomplete global batches
    are dropped (or, with keep_last, shared out as far as they go)."""

    def __init__(self, n, local, steps, process_id, num_processes, shuffle, seed, keep_last):
        self.n, self.local, self.steps = n, local, steps
        self.pid, self.nproc = process_id, num_processes
        self.shuffle, self.seed, self.keep_last = shuffle, seed, keep_last
        self.epoch = 0

    def _order(self):
        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.n, generator=g).tolist()

    def __iter__(self):
        order = self._order()
        self.epoch += 1
        glob = self.local * self.nproc
        full = self.n // glob
        rows = self.local // self.steps
        for j in range(full):
            out = []
            for st in range(self.steps):
                start = j * glob + (st * self.nproc + self.pid) * rows
                out.extend(order[start:start + rows])
            yield out
        if self.keep_last and full * glob < self.n:
            rest = order[full * glob:]
            share = rest[self.pid * self.local:(self.pid + 1) * self.local]
            if share:
                yield share

    def __len__(self):
        glob = self.local * self.nproc
        full = self.n // glob
        extra = self.keep_last and full * glob + self.pid * self.local < self.n
        return full + (1 if extra else 0)


class DataLoader(tud.DataLoader):
    """poptorch.DataLoader(options, dataset, batch_size=1, shuffle=False, num_workers=0,
    drop_last=True, persistent_workers=None, auto_distributed_partitioning=True,
    mode=DataLoaderMode.Sync, async_options=None, rebatched_worker_size=None, **kwargs)."""

    def __init__(self, options, dataset, batch_size=1, shuffle=None, num_workers=0,
                 drop_last=True, persistent_workers=None, auto_distributed_partitioning=True,
                 mode=enums.DataLoaderMode.Sync, async_options=None,
                 rebatched_worker_size=None, **kwargs):
        batch_sampler = kwargs.pop("batch_sampler", None)
        if hasattr(options, "_freeze"):
            options._freeze()  # PopTorch's rule: a change after the loader took them raises
        if batch_sampler is not None:
            self._init_user_sampler(options, dataset, batch_sampler, batch_size, shuffle,
                                    num_workers, drop_last, persistent_workers,
                                    auto_distributed_partitioning, mode, async_options,
                                    kwargs)
            return
        self._user_sampler = False
        if batch_size is None:
            self._init_unbatched(options, dataset, shuffle, num_workers, persistent_workers,
                                 auto_distributed_partitioning, mode, async_options, kwargs)
            return
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size expects an integer >= 1 (or None: the dataset's "
                             f"items as they are), not {batch_size!r}")
        self._options = options
        self._mode = enums.DataLoaderMode(mode)
        self._async_options = dict(async_options or {})
        self.batch_size_per_step = batch_size
        self._combined = _combined(options, batch_size)
        nproc = options.Distributed.numProcesses
        pid = options.Distributed.processId
        iterable = isinstance(dataset, tud.IterableDataset)
        shuffle = bool(shuffle)
        kwargs.setdefault("persistent_workers", bool(persistent_workers))
        if self._mode == enums.DataLoaderMode.AsyncRebatched:
            # Single samples from the workers; the accessor makes the combined batches.
            if iterable:
                super().__init__(dataset, batch_size=None, num_workers=num_workers, **kwargs)
            else:
                super().__init__(dataset, batch_size=None, shuffle=shuffle,
                                 num_workers=num_workers, **kwargs)
            self._rebatch = self._combined
            self._drop_last = drop_last
            return
        self._rebatch = None
        seeded = shuffle and options.random_seed is not None
        if iterable or ((nproc == 1 and not seeded) or not auto_distributed_partitioning):
            if nproc > 1 and iterable:
                raise Error("poptorch.DataLoader: an IterableDataset must split itself "
                            "between processes (use torch.utils.data.get_worker_info and "
                            "options.Distributed.processId)")
            super().__init__(dataset, batch_size=self._combined,
                             shuffle=shuffle if not iterable else None,
                             num_workers=num_workers, drop_last=drop_last, **kwargs)
            return
        seed = options.random_seed
        if shuffle and seed is None:
            raise Error("poptorch.DataLoader: shuffling across several processes needs the "
                        "same poptorch.Options().randomSeed(...) in every process")
        steps = options.device_iterations * options.Training.gradient_accumulation
        sampler = _ShareSampler(len(dataset), self._combined, steps, pid, nproc, shuffle,
                                seed or 0, not drop_last)
        super().__init__(dataset, batch_sampler=sampler, num_workers=num_workers, **kwargs)

    def _init_unbatched(self, options, dataset, shuffle, num_workers, persistent_workers,
                        auto_distributed_partitioning, mode, async_options, kwargs):
        """batch_size=None (PopTorch's and torch's): each item of the dataset is given as
        it is, already a whole batch; combinedBatchSize is None. Not with the automatic
        split between processes, which needs a batch size."""
        if options.Distributed.numProcesses > 1 and auto_distributed_partitioning:
            raise Error("batch_size=None not allowed when using "
                        "auto_distributed_partitioning.")
        self._options = options
        self._mode = enums.DataLoaderMode(mode)
        if self._mode == enums.DataLoaderMode.AsyncRebatched:
            self._mode = enums.DataLoaderMode.Async
        self._async_options = dict(async_options or {})
        self.batch_size_per_step = None
        self._combined = None
        self._rebatch = None
        self._unbatched = True
        kwargs.setdefault("persistent_workers", bool(persistent_workers))
        iterable = isinstance(dataset, tud.IterableDataset)
        super().__init__(dataset, batch_size=None, shuffle=None if iterable else bool(shuffle),
                         num_workers=num_workers, **kwargs)

    def _init_user_sampler(self, options, dataset, batch_sampler, batch_size, shuffle,
                           num_workers, drop_last, persistent_workers,
                           auto_distributed_partitioning, mode, async_options, kwargs):
        """A batch_sampler of the program's own (PopTorch's rule): each of its batches is
        one micro-batch, and deviceIterations x replicas x gradientAccumulation of them in a
        row are concatenated into a combined batch (the last one shorter unless
        drop_last)."""
        if batch_size != 1 or shuffle:
            raise Error("`batch_sampler` option is mutually exclusive with batch_size, "
                        "shuffle.")
        if options.Distributed.numProcesses > 1 and auto_distributed_partitioning:
            raise Error("`batch_sampler` option is mutually exclusive with "
                        "auto_distributed_partitioning=True.")
        self._user_sampler = True
        self._options = options
        self._mode = enums.DataLoaderMode(mode)
        if self._mode == enums.DataLoaderMode.AsyncRebatched:
            self._mode = enums.DataLoaderMode.Async
        self._async_options = dict(async_options or {})
        self._n_combine = _combined(options, 1)
        per = getattr(batch_sampler, "batch_size", None) or 1
        self.batch_size_per_step = per
        self._combined = per * self._n_combine
        self._sampler_drop_last = bool(drop_last)
        self._rebatch = None
        kwargs.setdefault("persistent_workers", bool(persistent_workers))
        super().__init__(dataset, batch_sampler=batch_sampler, num_workers=num_workers,
                         **kwargs)

    def _combined_batches(self, it):
        """Concatenates self._n_combine consecutive batches of it, leaf by leaf (tensors in
        any structure, custom types through their ICustomArgParser)."""
        from . import capture
        group, spec = [], None
        for batch in it:
            leaves, names = [], []
            spec = capture.flatten(batch, "batch", leaves, names)
            group.append(leaves)
            if len(group) == self._n_combine:
                yield capture.unflatten(spec, iter(_cat(group)))
                group = []
        if group and not self._sampler_drop_last:
            yield capture.unflatten(spec, iter(_cat(group)))

    @property
    def combinedBatchSize(self):
        """Samples per batch: B x deviceIterations x gradientAccumulation x replicas."""
        return self._combined

    @property
    def options(self):
        return self._options

    def _plain_iter(self):
        """An epoch's iterator of combined batches: the batched path's when it reproduces
        this loader's batches exactly, else torch's."""
        if self._user_sampler:
            it = super().__iter__()
            return self._combined_batches(it) if self._n_combine != 1 else it
        if self.__dict__.get("_unbatched"):
            return super().__iter__()
        fetcher = None if self._rebatch else batched.plan(self)
        if fetcher is not None:
            return batched.BatchedIter(self, fetcher)
        return super().__iter__()

    def __iter__(self):
        if self._mode == enums.DataLoaderMode.Sync:
            return self._plain_iter()
        acc = getattr(self, "_accessor", None)
        if acc is None:
            acc = AsynchronousDataAccessor(self, rebatched_size=self._rebatch,
                                           **self._async_options)
            object.__setattr__(self, "_accessor", acc)
        return iter(acc)

    def __len__(self):
        if self._user_sampler:
            n = super().__len__()
            k = self._n_combine
            return n // k if self._sampler_drop_last else -(-n // k)
        if self._rebatch:
            n = super().__len__()
            return n // self._rebatch if self._drop_last else -(-n // self._rebatch)
        return super().__len__()

    def terminate(self):
        acc = getattr(self, "_accessor", None)
        if acc is not None:
            acc.terminate()


def _cat(group):
    """The i-th tensors of every batch in group, each list concatenated along dim 0."""
    return [torch.cat([leaves[i] for leaves in group]) for i in range(len(group[0]))]


_END = object()


class _Failure:
    def __init__(self, exc):
        self.exc = exc


class AsynchronousDataAccessor:
    """Iterates dataset (a DataLoader) in a background thread, up to buffer_size batches
    ahead of the caller. With rebatched_size, dataset yields single samples and the
    accessor collates them rebatched_size at a time (an incomplete last batch is dropped,
    unless dataset is a DataLoader made with drop_last=False). Each `for` over the
    accessor is one epoch of the dataset.
    The first epoch starts when the accessor is made: a dataset that cannot give its
    first batch raises Error there ("worker thread failed to start"), as in PopTorch."""

    def __init__(self, dataset, buffer_size=3, miss_sleep_time_in_ms=0.1,
                 load_indefinitely=True, early_preload=False, sharing_strategy=None,
                 rebatched_size=None):
        if buffer_size < 1:
            raise ValueError("buffer_size must be at least 1")
        self._dataset = dataset
        self._size = buffer_size
        self._rebatch = rebatched_size
        self._thread = None
        self._stop = None
        self._queue = None
        self._first = None  # the started epoch's first batch, made at construction
        # PopTorch's accessor starts loading when it is made, and fails there when the
        # dataset cannot give its first batch.
        self._start()
        first = self._queue.get()
        if isinstance(first, _Failure):
            self._thread.join()
            self._thread = None
            # The worker's failure as PopTorch's worker reports it, with its traceback.
            logger.error("AsynchronousDataAccessor: the dataset failed to give its first "
                         "batch:\n%s", "".join(traceback.format_exception(first.exc)))
            raise Error("AsynchronousDataAccessor worker thread failed to start: the first "
                        f"batch raised {type(first.exc).__name__}: {first.exc}") \
                from first.exc
        self._first = [first]

    def __len__(self):
        return len(self._dataset)

    def _source(self, it):
        if not self._rebatch:
            yield from it
            return
        pending = []
        for sample in it:
            pending.append(sample)
            if len(pending) == self._rebatch:
                yield tud.default_collate(pending)
                pending = []
        # The loader's drop_last=False keeps the shorter last batch (PopTorch's rule).
        if pending and getattr(self._dataset, "_drop_last", True) is False:
            yield tud.default_collate(pending)

    def _work(self, it, q, stop):
        try:
            for batch in self._source(it):
                while not stop.is_set():
                    try:
                        q.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            q.put(_Failure(exc))

    def terminate(self):
        """Stops the background thread (waiting for the batch it is preparing)."""
        self._first = None
        if self._thread is not None:
            self._stop.set()
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join()
            self._thread = None

    def _start(self):
        """Starts an epoch: the dataset's iterator and the thread filling the queue."""
        # The loader's iterator (and its worker processes) is made here, on the caller's
        # thread: forking from the background thread could copy a lock another thread
        # holds into the workers.
        it = self._dataset._plain_iter() if isinstance(self._dataset, DataLoader) \
            else iter(self._dataset)
        self._queue = queue.Queue(maxsize=self._size)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(it, self._queue, self._stop),
                                        name="poptorch-async-loader", daemon=True)
        self._thread.start()

    def __iter__(self):
        first, self._first = self._first, None
        if first is None:
            self.terminate()
            self._start()
        q = self._queue
        while True:
            item = first.pop() if first else q.get()
            if item is _END:
                self._thread.join()
                self._thread = None
                return
            if isinstance(item, _Failure):
                self._thread = None
                raise item.exc
            yield item

    def __del__(self):
        try:
            self.terminate()
        except Exception:
            pass
