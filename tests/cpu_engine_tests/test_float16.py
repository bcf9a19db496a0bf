"""float16 arrays through the CPU fast paths: computed in float32, each
result rounded to float16 once, so they equal the float32 path's results
rounded (bit for bit)."""
import chainer
import numpy
import pytest

import cpu_engine
from cpu_engine import float16
from cpu_engine import updates

HALF, FLOAT = numpy.float16, numpy.float32


def _run(fn, arrays, gy_seed=3):
    """Outputs and input gradients of ``fn(*arrays)`` (arrays as given)."""
    xs = [chainer.Variable(a) for a in arrays]
    y = fn(*xs)
    gy = numpy.random.RandomState(gy_seed).randn(*y.shape).astype(HALF)
    y.grad = gy.astype(y.dtype)
    y.backward()
    return [y.array] + [x.grad for x in xs]


def _check(fn, arrays):
    """``fn`` on float16 arrays == ``fn`` on their float32 copies, rounded."""
    half = [a.astype(HALF) for a in arrays]
    got = _run(fn, half)
    expected = _run(fn, [a.astype(FLOAT) for a in half])
    for g, e in zip(got, expected):
        assert g.dtype == HALF
        numpy.testing.assert_array_equal(g, e.astype(HALF))


@pytest.mark.parametrize('ksize,stride,pad', [(1, 1, 0), (1, 2, 0),
                                              (3, 1, 1), (7, 2, 3)])
def test_convolution(ksize, stride, pad):
    rng = numpy.random.RandomState(0)
    x = rng.randn(2, 8, 9, 9)
    W = rng.randn(4, 8, ksize, ksize) * 0.3
    b = rng.randn(4)
    _check(lambda x, W, b: cpu_engine.convolution_2d(x, W, b, stride, pad),
           [x, W, b])


def test_convolution_sums_in_float32():
    # 4096 products of 1: float16 accumulation would stop at 2048.
    x = numpy.ones((1, 4096, 1, 1), HALF)
    W = numpy.ones((1, 4096, 1, 1), HALF)
    assert cpu_engine.convolution_2d(x, W).array.item() == 4096


def test_relu_and_add_relu():
    rng = numpy.random.RandomState(1)
    x, s = rng.randn(2, 3, 4, 5), rng.randn(2, 3, 4, 5)
    _check(cpu_engine.relu, [x])
    _check(cpu_engine.add_relu, [x, s])


def test_max_pooling():
    x = numpy.random.RandomState(2).randn(2, 3, 9, 9)
    _check(lambda x: cpu_engine.max_pooling_2d(x, 3, stride=2), [x])


def test_batch_normalization_half_activations_float32_parameters():
    rng = numpy.random.RandomState(4)
    x = (rng.randn(4, 3, 5, 5) * 2 + 1).astype(HALF)
    gamma, beta = rng.rand(3).astype(FLOAT) + 0.5, rng.randn(3).astype(FLOAT)
    means = []

    def bn(x, gamma, beta):
        mean = numpy.zeros(3, FLOAT)
        means.append(mean)
        return cpu_engine.batch_normalization(
            x, gamma, beta, running_mean=mean,
            running_var=numpy.ones(3, FLOAT), decay=0.)
    y, gx, ggamma, gbeta = _run(bn, [x, gamma, beta])
    y32, gx32, ggamma32, gbeta32 = _run(bn, [x.astype(FLOAT), gamma, beta])
    assert (y.dtype, gx.dtype, ggamma.dtype, means[0].dtype) == (
        HALF, HALF, FLOAT, FLOAT)
    numpy.testing.assert_array_equal(y, y32.astype(HALF))
    numpy.testing.assert_array_equal(gx, gx32.astype(HALF))
    numpy.testing.assert_array_equal(ggamma, ggamma32)
    numpy.testing.assert_array_equal(gbeta, gbeta32)
    numpy.testing.assert_array_equal(means[0], means[1])


def test_weight_decay_of_half_arrays_rounds_once():
    rng = numpy.random.RandomState(5)
    g, theta = rng.randn(1000).astype(HALF), rng.randn(1000).astype(HALF)
    expected = g.astype(FLOAT)
    updates.weight_decay(expected, theta.astype(FLOAT), 0.25)
    updates.weight_decay(g, theta, 0.25)
    numpy.testing.assert_array_equal(g, expected.astype(HALF))


def test_conversions_keep_the_memory_order():
    a = numpy.random.RandomState(6).randn(3, 2, 4, 5).astype(FLOAT)
    channel_major = a.transpose(1, 0, 2, 3)
    half = float16.narrow(channel_major)
    assert half.transpose(1, 0, 2, 3).flags.c_contiguous
    numpy.testing.assert_array_equal(half, channel_major.astype(HALF))
    wide = float16.widen(half[:, :, ::2])  # not dense: C order
    numpy.testing.assert_array_equal(wide, half[:, :, ::2].astype(FLOAT))
