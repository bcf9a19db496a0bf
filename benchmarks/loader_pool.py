#!/usr/bin/env python
"""Images/s delivered by the loader processes: LoaderPool against the Pool.

    python -m benchmarks.loader_pool [--rounds 5] [--batches 30]
        [--loaders 1] [--batchsize 32] [--crop-size 224]

The training iterator's loaders (:class:`image_data.loaders.LoaderPool`,
one pipe per loader, so that a dead loader ends the worker) against
``multiprocessing.Pool``'s ``map_async``, which they replace: each
transforms ImageNet-like JPEGs (:mod:`benchmarks.photos`) with the training
transform, the next micro-batch submitted before the current one is taken,
as the training iterator prefetches. Rounds alternate the two, so that load
from other processes meets both alike; it prints each one's images/s per
round, their medians and the median of the per-round ratios.
"""
import argparse
import multiprocessing
import statistics
import tempfile
import time

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import numpy

from benchmarks.photos import write_photos
import image_data
from image_data.loaders import LoaderPool

_pool_state = {}


def transform_one(context, task):
    """``context``: (paths, transform); ``task``: an image's index."""
    paths, transform = context
    return transform((paths[task % len(paths)], 0),
                     numpy.random.default_rng([0, task]))


def _start_pool_worker(context):
    _pool_state['context'] = context


def _pool_load(task):
    return transform_one(_pool_state['context'], task)


class MultiprocessingPool(object):
    """``multiprocessing.Pool`` with LoaderPool's interface."""

    def __init__(self, n_processes, context):
        self.pool = multiprocessing.get_context('forkserver').Pool(
            n_processes, _start_pool_worker, (context,))

    def submit(self, tasks):
        return self.pool.map_async(_pool_load, tasks)

    def close(self):
        self.pool.close()
        self.pool.join()


def images_per_second(pool, batches, batchsize):
    """Images/s over ``batches`` micro-batches after one warm-up, each next
    one submitted before the current one is taken."""
    pending = pool.submit(list(range(batchsize)))
    pending.get()
    pending = pool.submit(list(range(batchsize)))
    start = time.perf_counter()
    for b in range(batches):
        following = pool.submit(list(range((b + 1) * batchsize,
                                           (b + 2) * batchsize)))
        pending.get()
        pending = following
    elapsed = time.perf_counter() - start
    pending.get()
    return batches * batchsize / elapsed


def pools(paths, loaders, crop_size):
    """``{name: a function that starts that pool}`` over ``paths``."""
    resize = image_data.transforms.resize_for(crop_size)
    transform = image_data.TrainTransform(
        crop_size, image_data.load_mean(None, resize), resize)
    context = (paths, transform)
    return {'LoaderPool': lambda: LoaderPool(loaders, transform_one, context),
            'Pool': lambda: MultiprocessingPool(loaders, context)}


def measure(paths, args):
    """``{name: [images/s of each round]}``, the order alternating."""
    makers = pools(paths, args.loaders, args.crop_size)
    rates = {name: [] for name in makers}
    for r in range(args.rounds):
        for name in sorted(makers, reverse=bool(r % 2)):
            pool = makers[name]()
            try:
                rates[name].append(images_per_second(pool, args.batches,
                                                     args.batchsize))
            finally:
                pool.close()
    return rates


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--batches', type=int, default=30)
    parser.add_argument('--loaders', type=int, default=1)
    parser.add_argument('--batchsize', type=int, default=32)
    parser.add_argument('--crop-size', type=int, default=224)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        rates = measure(write_photos(folder, 16), args)
    print('{} loader(s), micro-batches of {} images at {} px, {} rounds of '
          '{} micro-batches'.format(args.loaders, args.batchsize,
                                    args.crop_size, args.rounds,
                                    args.batches))
    for name, values in rates.items():
        print('  {:<10} images/s: median {:.1f} ({})'.format(
            name, statistics.median(values),
            ', '.join('{:.1f}'.format(v) for v in values)))
    ratios = [new / old for new, old in zip(rates['LoaderPool'],
                                            rates['Pool'])]
    print('  LoaderPool / Pool: median {:.3f} ({})'.format(
        statistics.median(ratios),
        ', '.join('{:.3f}'.format(v) for v in ratios)))


if __name__ == '__main__':
    main()
