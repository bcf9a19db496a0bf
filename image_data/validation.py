"""The validation set split over the workers, as an iterator per worker.

Each worker takes one contiguous, disjoint shard, so every image is
evaluated exactly once across the job however unevenly the set divides;
:class:`extensions.DistributedEvaluator` all-reduces the sums.
"""
import chainer
import numpy

from image_data.loaders import LoaderPool


def validation_shard(pairs, rank, size, limit=None):
    """Worker ``rank``'s share of the pairs, or of ``limit`` of them spread
    evenly over the set (a class-ordered set is then sampled across its
    classes, not in its first class alone)."""
    n = len(pairs)
    if limit is None or limit >= n:
        return pairs[n * rank // size:n * (rank + 1) // size]
    spread = numpy.arange(limit) * n // limit
    rest = numpy.setdiff1d(numpy.arange(n), spread, assume_unique=True)
    return chainer.datasets.SubDataset(
        pairs, limit * rank // size, limit * (rank + 1) // size,
        order=numpy.concatenate([spread, rest]))


def validation_iterator(pairs, rank, size, transform, batchsize,
                        n_processes=0, limit=None):
    """A one-pass iterator over worker ``rank``'s transformed shard, loaded
    by ``n_processes`` processes (0: in this process)."""
    return ValidationIterator(chainer.datasets.TransformDataset(
        validation_shard(pairs, rank, size, limit), transform), batchsize,
        n_processes)


def _load_item(dataset, index):
    return dataset[index]


class ValidationIterator(chainer.dataset.Iterator):
    """One pass over ``dataset`` in order, in batches of ``batch_size`` (the
    last one shorter), started again by ``reset()``; with ``n_processes``
    loaders (:class:`image_data.loaders.LoaderPool`) the next batch loads
    while this one is scored. Chainer's ``MultiprocessIterator`` would do
    this, but its pool waits for ever on a loader that died
    (:mod:`image_data.loaders`)."""

    def __init__(self, dataset, batch_size, n_processes=0):
        self.dataset = dataset
        self.batch_size = batch_size
        self._pool = LoaderPool(n_processes if len(dataset) else 0,
                                _load_item, dataset)
        self.reset()

    def reset(self):
        self._position, self._pending = 0, None

    @property
    def epoch_detail(self):
        return self._position / max(len(self.dataset), 1)

    @property
    def epoch(self):
        return int(self.is_new_epoch)

    @property
    def is_new_epoch(self):
        return 0 < len(self.dataset) == self._position

    def _indices(self, start):
        return list(range(start, min(start + self.batch_size,
                                     len(self.dataset))))

    def __next__(self):
        if self._position >= len(self.dataset):
            raise StopIteration
        indices = self._indices(self._position)
        self._position = indices[-1] + 1
        loading = self._pending or self._pool.submit(indices)
        self._pending = (self._pool.submit(self._indices(self._position))
                         if self._position < len(self.dataset) else None)
        return loading.get()

    next = __next__

    def finalize(self):
        if self._pool is not None:
            self._pool.close()
            self._pool = None
