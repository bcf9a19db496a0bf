#!/usr/bin/env python
"""Precision of the float16 gradient mean over p workers, against float64.

    python -m benchmarks.fp16_precision [--workers 8,32,128,512,1024]
        [--batchsize 4] [--crop-size 32] [--train-steps 30] [--sample 128]

Emulates p workers in one process from real per-worker gradients of the
project's ResNet-50 (CPU engine layers, 10 classes): worker i's gradient is
that of micro-batch i (``--batchsize`` images of the embedded demo dataset
at ``--crop-size`` px), at initialization and after ``--train-steps`` steps
of momentum SGD (lr 0.1, batch 32). Every order is emulated with the
arithmetic of its communicator on the elements of a fixed random sample
(one in ``--sample`` of each parameter, at least 64), each worker's scale
taken from the whole parameters:

    float32        float32 sum, then x 1/p
    divide-first   x 2^-k (2^k >= p) into float32, the CPU ring (float16
                   wire, float32 accumulation), the last sum x 2^k/p before
                   its rounding
    sum-first      cast to float16, float16 sum, x 1/p in float16
                   (ChainerMN's pure_nccl with allreduce_grad_dtype float16)
    global scale   x s, one power of two s for all parameters
                   (half_precision.scaling.scales of the largest
                   magnitude over all parameters), the CPU
                   ring, x 1/(s p)
    per-parameter  the same with one s per parameter (what mpi_fp16 and
                   pure_nccl_fp16 do)

and the table gives, per state, p and order: the relative L2 error of the
mean against the float64 mean over all sampled elements, the median over
parameters of each parameter's relative L2 error, the share of elements
whose float64 mean is non-zero that come out zero (flushed), and the
number of non-finite elements (overflows).
"""
import argparse
import glob
import os
import time

import chainer
import numpy
from PIL import Image

import cpu_engine
from half_precision import scaling
from half_precision.conversion import add_half
from half_precision.conversion import to_half
from image_data import demo
import models

ORDERS = ('float32', 'divide-first', 'sum-first', 'global scale',
          'per-parameter')


def _demo_images(crop_size):
    """The demo training set as (N, 3, crop, crop) float32 in [0, 1] and
    int32 labels, in a fixed shuffled order."""
    paths = sorted(glob.glob(os.path.join(demo.TRAIN_DIR, '*', '*')))
    images = numpy.stack([
        numpy.asarray(Image.open(path).convert('RGB').resize(
            (crop_size, crop_size), Image.BILINEAR), numpy.float32)
        .transpose(2, 0, 1) / 255. for path in paths])
    labels = numpy.array([int(os.path.basename(os.path.dirname(path))[0])
                          for path in paths], numpy.int32)
    order = numpy.random.RandomState(0).permutation(len(paths))
    return images[order], labels[order]


def _train(model, images, labels, steps):
    optimizer = chainer.optimizers.MomentumSGD(lr=0.1)
    optimizer.setup(model)
    for step in range(steps):
        i = numpy.arange(32 * step, 32 * step + 32) % len(images)
        model.cleargrads()
        model(images[i], labels[i]).backward()
        optimizer.update()


class WorkerGradients(object):
    """The sampled elements and each parameter's largest magnitude of the
    gradients of ``workers`` micro-batches.

    Attributes:
        names (list): parameter paths, sorted.
        segments (numpy.ndarray): index of the parameter of every sampled
            element.
        sample (numpy.ndarray): (workers, sampled elements) float32.
        peaks (numpy.ndarray): (workers, parameters) float32.
    """

    def __init__(self, model, images, labels, workers, batchsize, every):
        named = sorted(model.namedparams())
        self.names = [name for name, _ in named]
        rng = numpy.random.RandomState(1)
        picks = [numpy.sort(rng.choice(
            p.size, min(p.size, max(64, p.size // every)), replace=False))
            for _, p in named]
        self.segments = numpy.concatenate([
            numpy.full(len(pick), i) for i, pick in enumerate(picks)])
        self.sample = numpy.empty((workers, self.segments.size),
                                  numpy.float32)
        self.peaks = numpy.empty((workers, len(named)), numpy.float32)
        start = len(images) // 2  # images the training steps saw last
        for w in range(workers):
            i = (start + numpy.arange(batchsize * w, batchsize * (w + 1))) \
                % len(images)
            model.cleargrads()
            model(images[i], labels[i]).backward()
            grads = [p.grad for _, p in named]
            self.peaks[w] = scaling.maxima(grads)
            self.sample[w] = numpy.concatenate([
                g.ravel()[pick] for g, pick in zip(grads, picks)])


def _ring(contributions, scale):
    """The CPU ring's float16 sum of ``contributions * scale`` (each row a
    worker): float32 accumulation, a rounding to float16 per hop."""
    acc = numpy.empty(contributions.shape[1], numpy.float32)
    wire = numpy.empty(contributions.shape[1], numpy.float16)
    numpy.multiply(contributions[0], scale, out=acc)
    to_half(acc, wire)
    for row in contributions[1:]:
        numpy.multiply(row, scale, out=acc)
        add_half(acc, wire)
        to_half(acc, wire)
    return acc, wire


def emulate(order, grads, p):
    """The float32 mean of the first ``p`` workers' sampled elements as
    ``order`` computes it."""
    x = grads.sample[:p]
    with numpy.errstate(over='ignore', invalid='ignore'):
        if order == 'float32':
            return x.sum(0, dtype=numpy.float32) * numpy.float32(1. / p)
        if order == 'divide-first':
            k = (p - 1).bit_length()
            acc, wire = _ring(x[:-1], numpy.float32(2. ** -k)) if p > 1 \
                else (None, numpy.zeros(x.shape[1], numpy.float16))
            last = x[-1] * numpy.float32(2. ** -k) + wire.astype(
                numpy.float32)
            return (last * numpy.float32(2. ** k / p)).astype(
                numpy.float16).astype(numpy.float32)
        if order == 'sum-first':
            h = x.astype(numpy.float16)
            total = h[0].copy()
            for row in h[1:]:
                total += row
            return (total * numpy.float16(1. / p)).astype(numpy.float32)
        peaks = grads.peaks[:p].max(0)
        if order == 'global scale':
            peaks = numpy.full_like(peaks, peaks.max())
        scales = scaling.scales(peaks, p)
        _, wire = _ring(x, scales[grads.segments])
        return wire.astype(numpy.float32) * scaling.inverses(
            scales, p)[grads.segments]


def measure(order, grads, p):
    """(relative L2 error, median per-parameter relative L2 error,
    flushed share, non-finite count) of ``order`` at ``p`` workers."""
    exact = grads.sample[:p].astype(numpy.float64).mean(0)
    got = emulate(order, grads, p).astype(numpy.float64)
    finite = numpy.isfinite(got)
    diff = numpy.where(finite, got - exact, 0.)
    squares = numpy.bincount(grads.segments, diff ** 2)
    norms = numpy.bincount(grads.segments, exact ** 2)
    per_param = numpy.sqrt(squares[norms > 0] / norms[norms > 0])
    nonzero = exact != 0
    return (numpy.sqrt(squares.sum() / norms.sum()),
            float(numpy.median(per_param)),
            numpy.count_nonzero((got == 0) & nonzero)
            / max(1, numpy.count_nonzero(nonzero)),
            int(numpy.count_nonzero(~finite)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--workers', default='8,32,128,512,1024',
                        help='comma-separated worker counts p')
    parser.add_argument('--batchsize', type=int, default=4,
                        help='images per emulated worker')
    parser.add_argument('--crop-size', type=int, default=32)
    parser.add_argument('--train-steps', type=int, default=30)
    parser.add_argument('--sample', type=int, default=128,
                        help='keep one in SAMPLE elements of each parameter')
    args = parser.parse_args(argv)
    try:
        workers = sorted(int(p) for p in args.workers.split(','))
    except ValueError:
        parser.error('--workers must be comma-separated integers, got {}'
                     .format(args.workers))
    if (workers[0] < 1 or args.batchsize < 1 or args.crop_size < 32
            or args.train_steps < 0 or args.sample < 1):
        parser.error('--workers, --batchsize and --sample must be positive, '
                     '--crop-size at least 32, --train-steps non-negative')

    images, labels = _demo_images(args.crop_size)
    numpy.random.seed(0)
    model = models.build_classifier(models.ClassifierSpec(
        10, bn_stats='moving-average'), layers=cpu_engine)
    print('ResNet-50, 10 classes, {} px, {} images per worker, one in {} '
          'elements sampled'.format(args.crop_size, args.batchsize,
                                    args.sample))
    print('{:<12} {:>5} {:<14} {:>10} {:>12} {:>9} {:>9}'.format(
        'state', 'p', 'order', 'rel. L2', 'median/param', 'flushed',
        'overflow'))
    for state, steps in (('init', 0),
                         ('trained {}'.format(args.train_steps),
                          args.train_steps)):
        start = time.time()
        _train(model, images, labels, steps)
        grads = WorkerGradients(model, images, labels, workers[-1],
                                args.batchsize, args.sample)
        seconds = time.time() - start
        for p in workers:
            for order in ORDERS:
                error, median, flushed, overflow = measure(order, grads, p)
                print('{:<12} {:>5} {:<14} {:>10.2e} {:>12.2e} {:>8.3%} '
                      '{:>9}'.format(state, p, order, error, median,
                                     flushed, overflow))
        print('({}: {} gradients in {:.0f} s)'.format(
            state, workers[-1], seconds))


if __name__ == '__main__':
    main()
