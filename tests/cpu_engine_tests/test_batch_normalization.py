"""cpu_engine.batch_normalization against Chainer's batch normalization."""
import chainer
import chainer.functions as F
from chainer import gradient_check
import numpy
import pytest

import cpu_engine
from cpu_engine.batch_normalization import BatchNormalizationReLU
from cpu_engine.batch_normalization import NumPyBatchNormalizationImpl
from cpu_engine_helper import assert_same
from cpu_engine_helper import assert_keeps_layout
from cpu_engine_helper import KERNELS
from cpu_engine_helper import layout
from cpu_engine_helper import run
from cpu_engine_helper import run_double
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


def _bn_relu_inputs(shape, dtype, seed):
    rng = numpy.random.RandomState(seed)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    pdtype = numpy.float32 if dtype == numpy.float16 else dtype
    gamma = (rng.rand(shape[1]) + 0.5).astype(pdtype)
    beta = rng.standard_normal(shape[1]).astype(pdtype)
    return x, gamma, beta


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('kind', ['nchw', 'channel-major', 'channels-last'])
@pytest.mark.parametrize('dtype', [numpy.float32, numpy.float16,
                                   numpy.float64])
@pytest.mark.parametrize('kernels', KERNELS)
def test_relu_is_relu_of_the_output(shape, kind, dtype, kernels,
                                    monkeypatch):
    """``relu=True`` gives the values of ``relu(batch_normalization(...))``
    exactly, gradients and running statistics included, in one node (the
    input gradient of a channel that ReLU silences whole may be +0 for
    -0)."""
    use_kernels(kernels, monkeypatch)
    x, gamma, beta = _bn_relu_inputs(shape, dtype, 9)
    x = layout(x, kind)
    results = []
    for fused in (True, False):
        stats = [numpy.zeros(shape[1], gamma.dtype),
                 numpy.ones(shape[1], gamma.dtype)]

        def f(x, gamma, beta):
            kwargs = dict(running_mean=stats[0], running_var=stats[1])
            if fused:
                return cpu_engine.batch_normalization(x, gamma, beta,
                                                      relu=True, **kwargs)
            return cpu_engine.relu(
                cpu_engine.batch_normalization(x, gamma, beta, **kwargs))
        out, y = run(f, [x, gamma, beta])
        results.append(out + stats)
        if fused:
            assert isinstance(y.creator, BatchNormalizationReLU)
            if dtype == numpy.float32:
                assert_keeps_layout(y.array, x, kernels)
            assert (y.array >= 0).all() and (y.array == 0).any()
    for a, b in zip(*results):
        numpy.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('kind', ['nchw', 'channels-last'])
def test_relu_second_order_gradients_are_chainers(kind):
    x, gamma, beta = _bn_relu_inputs((4, 5, 3, 3), numpy.float32, 10)
    x = layout(x, kind)
    results = []
    for f in (lambda *a: cpu_engine.batch_normalization(*a, relu=True),
              lambda *a: F.relu(F.batch_normalization(*a))):
        results.append(run_double(f, [x, gamma, beta]))
    assert_same(*results, atol=1e-4, rtol=1e-3)


def test_relu_gradient_check_and_double_backward():
    x, gamma, beta = _bn_relu_inputs((3, 4, 2, 3), numpy.float64, 11)
    rng = numpy.random.RandomState(12)
    gy = rng.standard_normal(x.shape)

    def f(x, gamma, beta):
        return cpu_engine.batch_normalization(x, gamma, beta, relu=True)
    gradient_check.check_backward(f, (x, gamma, beta), gy,
                                  dtype=numpy.float64, atol=1e-6, rtol=1e-5)
    gradient_check.check_double_backward(
        f, (x, gamma, beta), gy,
        (rng.standard_normal(x.shape), rng.standard_normal(4),
         rng.standard_normal(4)), dtype=numpy.float64, atol=1e-5, rtol=1e-4)


def test_relu_fusion_can_be_switched_off():
    x, gamma, beta = _bn_relu_inputs((4, 3, 2, 2), numpy.float32, 14)
    with chainer.using_config('cpu_fused_relu', False):
        y = cpu_engine.batch_normalization(x, gamma, beta, relu=True)
    assert not isinstance(y.creator, BatchNormalizationReLU)
    assert isinstance(y.creator.inputs[0].creator,
                      chainer.functions.normalization.batch_normalization
                      .BatchNormalization)
    numpy.testing.assert_array_equal(
        y.array, cpu_engine.batch_normalization(x, gamma, beta,
                                                relu=True).array)


def test_relu_on_other_arrays_is_chainers_pair():
    x, gamma, beta = _bn_relu_inputs((5, 3), numpy.float32, 13)
    y = cpu_engine.batch_normalization(x, gamma, beta, relu=True)
    assert not isinstance(y.creator, BatchNormalizationReLU)
    numpy.testing.assert_array_equal(
        y.array, F.relu(F.batch_normalization(x, gamma, beta)).array)
