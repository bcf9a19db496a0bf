#!/usr/bin/env python
"""Seconds per update of K micro-batches: in-place sums against ``F.add``.

    python -m benchmarks.micro_batch_accumulation [--micro-batches 16]
        [--batchsize 32] [--width 0.125] [--crop-size 32] [--rounds 6]

An update of :class:`~updaters.MicroBatchUpdater` adds each micro-batch's
parameter gradients into the earlier ones' sums in place. Chainer's own
accumulation (K backward passes without clearing the gradients) adds them
with an ``F.add`` node per parameter and micro-batch instead. Both produce
the same floats (``tests/updaters_tests/test_micro_batch_updater.py``);
this prints the CPU seconds of one update of each, on the project's
ResNet-50 with the CPU engine, random data and momentum SGD at lr 0, rounds
alternating, and the ratio of the medians. Run it with
``OMP_NUM_THREADS=1`` on a quiet machine.
"""
import argparse
import time

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import numpy

import cpu_engine
import models
import updaters


class BackwardAccumulation(updaters.MicroBatchUpdater):
    """The same update with Chainer's accumulation of the gradients."""

    def update_core(self):
        iterator = self._iterators['main']
        optimizer = self._optimizers['main']
        optimizer.target.cleargrads()
        for _ in range(self.micro_batches):
            loss = optimizer.target(*self.converter(iterator.next(),
                                                    self.device))
            (loss / self.micro_batches).backward()
        optimizer.update()


def make_updater(cls, data, micro_batches, batchsize, width):
    numpy.random.seed(0)
    model = models.build_classifier(models.ClassifierSpec(
        10, width=width, bn_stats='moving-average'), layers=cpu_engine)
    optimizer = chainer.optimizers.MomentumSGD(lr=0)
    optimizer.setup(model)
    iterator = chainer.iterators.SerialIterator(data, batchsize)
    updater = cls(iterator, optimizer, chainer.dataset.concat_examples, -1,
                  micro_batches=micro_batches)
    reporter = chainer.reporter.Reporter()
    reporter.add_observer('main', model)
    return updater, reporter


def seconds_per_update(updater, reporter):
    with reporter.scope({}):
        start = time.process_time()
        updater.update()
        return time.process_time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--micro-batches', type=int, default=16)
    parser.add_argument('--batchsize', type=int, default=32)
    parser.add_argument('--width', type=float, default=0.125)
    parser.add_argument('--crop-size', type=int, default=32)
    parser.add_argument('--rounds', type=int, default=6)
    args = parser.parse_args()
    rng = numpy.random.RandomState(0)
    side = args.crop_size
    data = [(rng.randn(3, side, side).astype(numpy.float32),
             numpy.int32(i % 10))
            for i in range(args.batchsize * args.micro_batches)]
    contenders = {
        name: make_updater(cls, data, args.micro_batches, args.batchsize,
                           args.width)
        for name, cls in (('in-place', updaters.MicroBatchUpdater),
                          ('F.add', BackwardAccumulation))}
    for updater, reporter in contenders.values():  # warm-up
        seconds_per_update(updater, reporter)
    times = {name: [] for name in contenders}
    for i in range(args.rounds):
        for name in sorted(contenders, reverse=bool(i % 2)):
            times[name].append(seconds_per_update(*contenders[name]))
    print('{} micro-batches of {} images, width {:g}, {} px; CPU s per '
          'update over {} rounds'.format(
              args.micro_batches, args.batchsize, args.width, side,
              args.rounds))
    for name, seconds in times.items():
        print('{:>9}: median {:.3f}  ({})'.format(
            name, numpy.median(seconds),
            ', '.join('{:.3f}'.format(s) for s in seconds)))
    print('F.add / in-place: {:.2f}'.format(
        numpy.median(times['F.add']) / numpy.median(times['in-place'])))


if __name__ == '__main__':
    main()
