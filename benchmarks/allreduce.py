#!/usr/bin/env python
"""Gradient all-reduce time and bytes per worker, float32 against float16.

    mpiexec -n 4 python -m benchmarks.allreduce [--elements 25600000]

For one gradient of ``--elements`` float32 values (ResNet-50 has 25.6M) it
times, over every rank, each of

    collective  float32: MPI_Allreduce (sum) of the packed buffer
                float16: the float16-wire ring of ``mpi_fp16``
    mean_grad   float32: ``multi_node_mean_grad`` of ChainerMN's ``naive``
                float16: ``multi_node_mean_grad`` of ``mpi_fp16`` (the MAX
                         all-reduce of each parameter's largest magnitude,
                         scaling, casts and the non-finite check included)
                divide-first: the same mean with one scale 2^-k >= 1/p
                         applied before the sum and none measured (the
                         baseline of the ratio)

and prints the median over ``--repeats`` of the slowest rank's time, and
the ratio of the float16 mean_grad's time to divide-first's (the two run
alternately in one loop, so that load from other processes meets both).
Bytes sent per worker are counted for the float16 ring; for MPI's float32
all-reduce, whose algorithm is not visible, the row gives the
2 (p - 1) / p * 4 n bytes of a bandwidth-optimal all-reduce.
"""
import argparse
import time

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
from mpi4py import MPI
import numpy

import communicators
from communicators.gradients import named_gradients
from half_precision.conversion import to_float


class _Gradient(chainer.Link):
    def __init__(self, n):
        super(_Gradient, self).__init__()
        with self.init_scope():
            self.w = chainer.Parameter(numpy.zeros(n, numpy.float32))


def _median_seconds(mpi_comm, fn, prepare, warmup, repeats):
    return _alternating_medians(mpi_comm, [fn], prepare, warmup, repeats)[0]


def _alternating_medians(mpi_comm, fns, prepare, warmup, repeats):
    """Median seconds of the slowest rank of each of ``fns``, run in turn
    in every round."""
    times = [[] for _ in fns]
    for i in range(warmup + repeats):
        for fn, kept in zip(fns, times):
            prepare()
            mpi_comm.Barrier()
            start = time.perf_counter()
            fn()
            elapsed = mpi_comm.allreduce(time.perf_counter() - start,
                                         op=MPI.MAX)
            if i >= warmup:
                kept.append(elapsed)
    return [float(numpy.median(kept)) for kept in times]


def _divide_first_mean_grad(comm, model):
    """``multi_node_mean_grad`` of ``mpi_fp16`` with one scale 2^-k >= 1/p
    before the sum, the same ring and check, and the mean unpacked with
    ``to_float`` (times 2^k/p afterwards where p is no power of two)."""
    named = named_gradients(model, False)
    n = sum(param.grad.size for _, param in named)
    if comm._packed.size < n:
        comm._packed = numpy.empty(n, numpy.float32)
    packed = comm._packed[:n]
    k = (comm.size - 1).bit_length()
    offset = 0
    for _, param in named:
        g = param.grad
        numpy.multiply(g, numpy.float32(2. ** -k),
                       out=packed[offset:offset + g.size].reshape(g.shape))
        offset += g.size
    total = comm.ring(packed)
    bits = total.view(numpy.uint16)
    if bits.view(numpy.int16).max() >= 0x7c00 or bits.max() >= 0xfc00:
        raise ValueError('divide-first: non-finite mean')
    offset = 0
    for _, param in named:
        g = param.grad
        to_float(total[offset:offset + g.size].reshape(g.shape), g)
        if 2 ** k != comm.size:
            g *= numpy.float32(2. ** k / comm.size)
        offset += g.size


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--elements', type=int, default=25600000,
                        help='gradient length in float32 values')
    parser.add_argument('--repeats', type=int, default=10)
    parser.add_argument('--warmup', type=int, default=2)
    args = parser.parse_args(argv)
    if args.elements <= 0 or args.repeats <= 0 or args.warmup < 0:
        parser.error('--elements and --repeats must be positive and '
                     '--warmup non-negative')

    mpi_comm = MPI.COMM_WORLD
    p, n = mpi_comm.size, args.elements
    rng = numpy.random.RandomState(mpi_comm.rank)
    grad = (rng.standard_normal(n) * 1e-2).astype(numpy.float32)
    buf = numpy.empty_like(grad)
    out = numpy.empty_like(grad)
    model = _Gradient(n)
    naive = communicators.create_communicator('naive', mpi_comm=mpi_comm)
    fp16 = communicators.create_communicator('mpi_fp16', mpi_comm=mpi_comm)

    def refill():
        buf[...] = grad

    def reset_grad():
        model.w.grad = grad.copy()

    ring_bytes = []

    def ring():
        before = fp16.ring.bytes_sent
        fp16.ring(buf)
        ring_bytes.append(fp16.ring.bytes_sent - before)

    optimal_fp32 = 2 * (p - 1) * 4 * n // p
    scaled, divide_first = _alternating_medians(
        mpi_comm, [lambda: fp16.multi_node_mean_grad(model),
                   lambda: _divide_first_mean_grad(fp16, model)],
        reset_grad, args.warmup, args.repeats)
    rows = [
        ('collective', 'float32',
         _median_seconds(mpi_comm, lambda: mpi_comm.Allreduce(buf, out),
                         refill, args.warmup, args.repeats),
         optimal_fp32, 'model'),
        ('collective', 'float16',
         _median_seconds(mpi_comm, ring, refill, args.warmup, args.repeats),
         ring_bytes[-1], 'counted'),
        ('mean_grad', 'float32',
         _median_seconds(mpi_comm, lambda: naive.multi_node_mean_grad(model),
                         reset_grad, args.warmup, args.repeats),
         optimal_fp32, 'model'),
        ('mean_grad', 'float16', scaled, ring_bytes[-1], 'counted'),
        ('mean_grad', 'divide-first', divide_first, ring_bytes[-1],
         'counted'),
    ]
    if mpi_comm.rank == 0:
        print('processes: {}  elements: {}  repeats: {} (median of the '
              'slowest rank)'.format(p, n, args.repeats))
        print('{:<11} {:<12} {:>10} {:>16}'.format(
            'what', 'dtype', 'time [ms]', 'sent/worker [MB]'))
        for what, dtype, seconds, sent, how in rows:
            print('{:<11} {:<12} {:>10.1f} {:>10.1f} ({})'.format(
                what, dtype, seconds * 1e3, sent / 1e6, how))
        print('mean_grad float16 / divide-first: {:.3f}'.format(
            scaled / divide_first))


if __name__ == '__main__':
    main()
