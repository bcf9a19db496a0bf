"""benchmarks/fp16_precision.py: each order's emulation against the
arithmetic it stands for, on synthetic worker gradients."""
import numpy

from benchmarks import fp16_precision
from half_precision import scaling


class Gradients(object):
    """Two parameters: one of magnitudes 1e-9 to 1, one of 1e-12 to 1e-9,
    every worker's element within a factor of 1.5 of a shared one."""

    def __init__(self, workers):
        rng = numpy.random.RandomState(0)
        n = 4000
        self.segments = numpy.repeat([0, 1], n // 2)
        shared = numpy.where(
            self.segments == 0, 10. ** rng.uniform(-9, 0, n),
            10. ** rng.uniform(-12, -9, n)) * rng.choice([-1., 1.], n)
        self.sample = (shared * rng.uniform(0.5, 1.5, (workers, n))).astype(
            numpy.float32)
        self.peaks = numpy.stack([
            numpy.abs(self.sample[:, self.segments == i]).max(1)
            for i in (0, 1)], 1)


def test_per_parameter_order_is_the_communicators_arithmetic():
    grads = Gradients(8)
    got = fp16_precision.emulate('per-parameter', grads, 8)
    scales = scaling.scales(grads.peaks.max(0), 8)[grads.segments]
    acc = grads.sample[0] * scales
    wire = acc.astype(numpy.float16)
    for row in grads.sample[1:]:
        wire = (row * scales + wire.astype(numpy.float32)).astype(
            numpy.float16)
    expected = wire.astype(numpy.float32) * scaling.inverses(
        scaling.scales(grads.peaks.max(0), 8), 8)[grads.segments]
    numpy.testing.assert_array_equal(got, expected)


def test_orders_rank_as_their_ranges_say():
    grads = Gradients(64)
    results = {order: fp16_precision.measure(order, grads, 64)
               for order in fp16_precision.ORDERS}
    error, _, flushed, overflow = results['float32']
    assert error < 1e-6 and flushed == 0 and overflow == 0
    for order in fp16_precision.ORDERS[1:]:
        assert results[order][0] < 1e-2 and results[order][3] == 0, order
    flushed = {order: results[order][2] for order in results}
    assert flushed['per-parameter'] < flushed['global scale'] \
        < flushed['divide-first']
