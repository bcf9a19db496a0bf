"""The validation set split over the workers, as an iterator per worker.

Each worker takes one contiguous, disjoint shard, so every image is
evaluated exactly once across the job however unevenly the set divides;
:class:`extensions.DistributedEvaluator` all-reduces the sums.
"""
import chainer


def validation_shard(pairs, rank, size, limit=None):
    """Worker ``rank``'s share of the first ``limit`` (default all) pairs."""
    n = len(pairs) if limit is None else min(limit, len(pairs))
    return pairs[n * rank // size:n * (rank + 1) // size]


def validation_iterator(pairs, rank, size, transform, batchsize,
                        n_processes=0, limit=None):
    """A one-pass iterator over worker ``rank``'s transformed shard, loaded
    by ``n_processes`` processes (0: in this process)."""
    shard = chainer.datasets.TransformDataset(
        validation_shard(pairs, rank, size, limit), transform)
    if n_processes > 0:
        return chainer.iterators.MultiprocessIterator(
            shard, batchsize, repeat=False, shuffle=False,
            n_processes=n_processes)
    return chainer.iterators.SerialIterator(shard, batchsize, repeat=False,
                                            shuffle=False)
