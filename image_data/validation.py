"""The validation set split over the workers, as an iterator per worker.

Each worker takes one contiguous, disjoint shard, so every image is
evaluated exactly once across the job however unevenly the set divides;
:class:`extensions.DistributedEvaluator` all-reduces the sums.
"""
import chainer
import numpy


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
    shard = chainer.datasets.TransformDataset(
        validation_shard(pairs, rank, size, limit), transform)
    if n_processes > 0:
        return chainer.iterators.MultiprocessIterator(
            shard, batchsize, repeat=False, shuffle=False,
            n_processes=n_processes)
    return chainer.iterators.SerialIterator(shard, batchsize, repeat=False,
                                            shuffle=False)
