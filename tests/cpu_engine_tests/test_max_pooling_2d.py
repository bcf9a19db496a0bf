"""cpu_engine.max_pooling_2d against chainer.functions.max_pooling_2d."""
import chainer.functions as F
from chainer import gradient_check
import numpy
import pytest

import cpu_engine
from cpu_engine.max_pooling_2d import MaxPooling2D
from cpu_engine_helper import assert_same
from cpu_engine_helper import assert_keeps_layout
from cpu_engine_helper import KERNELS
from cpu_engine_helper import layout
from cpu_engine_helper import run
from cpu_engine_helper import run_double
from cpu_engine_helper import use_kernels


CASES = [
    # (shape, k, stride, pad, cover_all)
    ((2, 3, 9, 9), 3, 2, 0, True),    # the model's stem pooling
    ((2, 3, 9, 9), 3, 2, 1, False),
    ((1, 4, 8, 7), 2, None, 0, True),
    ((2, 2, 7, 7), 3, 1, 1, True),
    ((2, 3, 11, 10), 3, 2, 1, True),
    ((4, 16, 33, 30), 3, 2, 1, False),  # split over threads
    ((1, 2, 3, 3), 3, 2, 2, True),      # windows mostly in the padding
    ((1, 2, 3, 3), 2, 1, 2, True),      # windows wholly in it: y = -inf
]


@pytest.mark.parametrize('shape,k,stride,pad,cover_all', CASES)
@pytest.mark.parametrize('kind', ['nchw', 'channel-major', 'channels-last'])
@pytest.mark.parametrize('kernels', KERNELS)
def test_matches_chainer(shape, k, stride, pad, cover_all, kind, kernels,
                         monkeypatch):
    use_kernels(kernels, monkeypatch)
    rng = numpy.random.RandomState(10)
    x = rng.standard_normal(shape).astype(numpy.float32)
    x[0, 0, :3, :3] = 1.0  # ties: the first maximum gets the gradient
    x = layout(x, kind)
    expected, _ = run(lambda a: F.max_pooling_2d(a, k, stride, pad,
                                                 cover_all), [x])
    actual, y = run(lambda a: cpu_engine.max_pooling_2d(
        a, k, stride, pad, cover_all), [x])
    assert isinstance(y.creator, MaxPooling2D)
    assert_keeps_layout(y.array, x, kernels)
    assert_same(expected, actual, atol=0, rtol=0)


def test_gradient_check():
    x = numpy.random.RandomState(11).permutation(2 * 2 * 7 * 6).reshape(
        2, 2, 7, 6).astype(numpy.float64)
    gy = numpy.random.RandomState(12).standard_normal((2, 2, 4, 3))
    gradient_check.check_backward(
        lambda a: cpu_engine.max_pooling_2d(a, 3, 2, 1, False), x, gy,
        dtype=numpy.float64, eps=1e-3, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('shape,k,stride,pad,cover_all', CASES)
@pytest.mark.parametrize('dtype', [numpy.float16, numpy.float32,
                                   numpy.float64])
@pytest.mark.parametrize('kind', ['channel-major', 'channels-last'])
@pytest.mark.parametrize('kernels', KERNELS)
def test_double_backward_matches_chainer(shape, k, stride, pad, cover_all,
                                         dtype, kind, kernels, monkeypatch):
    """``ggy`` is ``ggx`` at the winners; where a window lies wholly in
    the padding Chainer's reads its -inf padding, and so does the engine.
    float16 input gradients of overlapping windows are summed in float32
    by the engine, in float16 by Chainer."""
    use_kernels(kernels, monkeypatch)
    rng = numpy.random.RandomState(17)
    x = rng.standard_normal(shape).astype(dtype)
    x[0, 0, :3, :3] = 1.0  # ties: the first maximum is the winner
    x = layout(x, kind)
    expected = run_double(lambda a: F.max_pooling_2d(
        a, k, stride, pad, cover_all), [x])
    actual = run_double(lambda a: cpu_engine.max_pooling_2d(
        a, k, stride, pad, cover_all), [x])
    tol = 1e-2 if dtype == numpy.float16 else 0
    assert_same(expected, actual, atol=tol, rtol=tol)


@pytest.mark.parametrize('k,stride,pad,cover_all', [
    (3, 2, 1, False), (3, 2, 1, True), (2, None, 0, True), (3, 1, 1, True)])
def test_gradient_check_double_backward(k, stride, pad, cover_all):
    rng = numpy.random.RandomState(18)
    x = rng.permutation(2 * 2 * 7 * 6).reshape(2, 2, 7, 6).astype(
        numpy.float64)
    y = F.max_pooling_2d(x, k, stride, pad, cover_all)
    gradient_check.check_double_backward(
        lambda a: cpu_engine.max_pooling_2d(a, k, stride, pad, cover_all),
        x, rng.standard_normal(y.shape), rng.standard_normal(x.shape),
        dtype=numpy.float64, eps=1e-3, atol=1e-6, rtol=1e-5)


def test_delegates_to_chainers_own_function(monkeypatch):
    # A drop-in: with chainer.functions.max_pooling_2d replaced by the
    # engine's, what the engine passes on (return_indices) still reaches
    # Chainer's own.
    monkeypatch.setattr(F, 'max_pooling_2d', cpu_engine.max_pooling_2d)
    x = numpy.arange(16, dtype=numpy.float32).reshape(1, 1, 4, 4)
    y, indices = F.max_pooling_2d(x, 2, cover_all=False,
                                  return_indices=True)
    numpy.testing.assert_array_equal(y.array, [[[[5, 7], [13, 15]]]])
    assert indices.shape == (1, 1, 2, 2)
