"""The CPU engine's functions take flipped and other non-contiguous views,
as NumPy's own functions do (Chainer's function tests pass them)."""
import chainer
import numpy
import pytest

import cpu_engine


def views(x):
    return {'flipped': x[..., ::-1], 'strided': x[:, :, ::2, :],
            'transposed': x.transpose(0, 1, 3, 2)}


@pytest.mark.parametrize('view', ['flipped', 'strided', 'transposed'])
def test_convolution_of_a_view_is_that_of_its_copy(view):
    rng = numpy.random.RandomState(0)
    x = views(rng.randn(2, 3, 8, 8).astype(numpy.float32))[view]
    conv = cpu_engine.Convolution2D(3, 4, 3, 1, 1)
    results = []
    for data in (x, numpy.ascontiguousarray(x)):
        v = chainer.Variable(data)
        y = conv(v)
        gy = numpy.ones_like(y.array)[..., ::-1]  # a flipped gradient too
        y.grad = gy
        conv.cleargrads()
        y.backward()
        results.append((y.array, v.grad, conv.W.grad.copy()))
    for got, want in zip(*results):
        numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('view', ['flipped', 'strided', 'transposed'])
def test_bn_relu_and_pooling_of_a_view_are_those_of_its_copy(view):
    rng = numpy.random.RandomState(1)
    x = views(rng.randn(2, 3, 8, 8).astype(numpy.float32))[view]
    bn = cpu_engine.BatchNormalization(3)
    for f in (lambda a: bn(a, relu=True),
              lambda a: cpu_engine.max_pooling_2d(a, 3, stride=2)):
        numpy.testing.assert_allclose(
            f(x).array, f(numpy.ascontiguousarray(x)).array, rtol=1e-6)
