"""The CPU engine's functions take flipped and other non-contiguous views,
as NumPy's own functions do (Chainer's function tests pass them)."""
import importlib

import chainer
import numpy
import pytest

import cpu_engine

convolution_module = importlib.import_module('cpu_engine.convolution_2d')
VIEWS = ['flipped', 'strided', 'transposed', 'reversed']


def views(x):
    # 'reversed': every axis flipped, every other element of a buffer twice
    # the size (chainer.testing's non-contiguous arrays)
    buffer = numpy.empty(tuple(2 * s for s in x.shape), x.dtype)
    buffer[(slice(None, None, -2),) * x.ndim] = x
    return {'flipped': x[..., ::-1], 'strided': x[:, :, ::2, :],
            'transposed': x.transpose(0, 1, 3, 2),
            'reversed': buffer[(slice(None, None, -2),) * x.ndim]}


@pytest.fixture(params=['default', 'onednn', 'onednn-channels-last'])
def paths(request, monkeypatch):
    """The engine's default choice of paths, or every float32 convolution
    by oneDNN with channel-major or channels-last activations."""
    if request.param != 'default':
        for name in ('ONEDNN_MIN_PIXELS', 'ONEDNN_MIN_PIXELS_1X1',
                     'ROWS_MAX_PIXELS'):
            monkeypatch.setattr(convolution_module, name, 0)
        with chainer.using_config('cpu_channels_last',
                                  request.param.endswith('channels-last')):
            yield
    else:
        yield


@pytest.mark.parametrize('view', VIEWS)
def test_convolution_of_a_view_is_that_of_its_copy(view, paths):
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


@pytest.mark.parametrize('view', VIEWS)
def test_bn_relu_and_pooling_of_a_view_are_those_of_its_copy(view, paths):
    rng = numpy.random.RandomState(1)
    x = views(rng.randn(2, 3, 8, 8).astype(numpy.float32))[view]
    shortcut = views(rng.randn(*x.shape).astype(numpy.float32))[
        'reversed']
    bn = cpu_engine.BatchNormalization(3)
    for f in (lambda a: bn(a, relu=True),
              lambda a: cpu_engine.add_relu(a, shortcut),
              lambda a: cpu_engine.max_pooling_2d(a, 3, stride=2)):
        results = []
        for data in (x, numpy.ascontiguousarray(x)):
            v = chainer.Variable(data)
            y = f(v)
            y.grad = views(numpy.ones_like(y.array))['reversed']
            y.backward()
            results.append((y.array, v.grad))
        for got, want in zip(*results):
            numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
