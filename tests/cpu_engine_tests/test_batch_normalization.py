"""cpu_engine.batch_normalization against Chainer's batch normalization."""
import chainer.functions as F
from chainer import gradient_check
import numpy
import pytest

import cpu_engine
from cpu_engine.batch_normalization import NumPyBatchNormalizationImpl
from cpu_engine_helper import assert_same
from cpu_engine_helper import assert_keeps_layout
from cpu_engine_helper import KERNELS
from cpu_engine_helper import layout
from cpu_engine_helper import run
from cpu_engine_helper import TOL32
from cpu_engine_helper import use_kernels

SHAPES = [(2, 3, 5, 4), (1, 7, 3, 3), (4, 19, 1, 1), (3, 300, 2, 3),
          (8, 64, 16, 16)]  # the last: several cache blocks


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('kind', ['nchw', 'channel-major', 'channels-last',
                                  'strided'])
@pytest.mark.parametrize('decay', [0.7, 0.0])
@pytest.mark.parametrize('kernels', KERNELS)
def test_matches_chainer(shape, kind, decay, kernels, monkeypatch):
    use_kernels(kernels, monkeypatch)
    rng = numpy.random.RandomState(6)
    x = layout((rng.standard_normal(shape) * 3 + 1).astype(numpy.float32),
               kind)
    gamma = (rng.rand(shape[1]) + 0.5).astype(numpy.float32)
    beta = rng.standard_normal(shape[1]).astype(numpy.float32)
    results = []
    for f in (F.batch_normalization, cpu_engine.batch_normalization):
        stats = [numpy.zeros(shape[1], numpy.float32),
                 numpy.ones(shape[1], numpy.float32)]
        out, y = run(lambda *a: f(*a, eps=2e-5, running_mean=stats[0],
                                  running_var=stats[1], decay=decay),
                     [x, gamma, beta])
        results.append(out + stats)
    assert isinstance(y.creator._impl, NumPyBatchNormalizationImpl)
    assert_keeps_layout(y.array, x, kernels)
    assert_same(*results, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize('kernels', KERNELS)
def test_keeps_chainers_statistics(kernels, monkeypatch):
    """mean, var (biased) and inv_std, which the gradient nodes reuse."""
    use_kernels(kernels, monkeypatch)
    rng = numpy.random.RandomState(16)
    x = (rng.standard_normal((4, 6, 3, 5)) * 2 + 3).astype(numpy.float32)
    gamma = (rng.rand(6) + 0.5).astype(numpy.float32)
    beta = rng.standard_normal(6).astype(numpy.float32)
    ours = cpu_engine.batch_normalization(x, gamma, beta).creator
    theirs = F.batch_normalization(x, gamma, beta).creator
    for name in ('mean', 'var', 'inv_std'):
        a, e = getattr(ours, name), getattr(theirs, name)
        assert a.dtype == e.dtype == numpy.float32
        numpy.testing.assert_allclose(a, e, rtol=1e-5)


def test_gradient_check_and_double_backward():
    rng = numpy.random.RandomState(7)
    x = rng.standard_normal((3, 4, 2, 3))
    gamma = rng.rand(4) + 0.5
    beta = rng.standard_normal(4)
    gy = rng.standard_normal(x.shape)
    gradient_check.check_backward(
        cpu_engine.batch_normalization, (x, gamma, beta), gy,
        dtype=numpy.float64, atol=1e-6, rtol=1e-5)
    # The gradient node is Chainer's, so second derivatives work as well.
    ggx = rng.standard_normal(x.shape)
    gradient_check.check_double_backward(
        cpu_engine.batch_normalization, (x, gamma, beta), gy,
        (ggx, rng.standard_normal(4), rng.standard_normal(4)),
        dtype=numpy.float64, atol=1e-5, rtol=1e-4)


def test_other_ranks_use_chainer():
    rng = numpy.random.RandomState(8)
    x = rng.standard_normal((5, 3)).astype(numpy.float32)
    gamma, beta = numpy.ones(3, numpy.float32), numpy.zeros(3, numpy.float32)
    y = cpu_engine.batch_normalization(x, gamma, beta)
    assert not isinstance(y.creator._impl, NumPyBatchNormalizationImpl)
    numpy.testing.assert_allclose(
        y.array, F.batch_normalization(x, gamma, beta).array, **TOL32)
