"""cpu_engine.convolution_2d against chainer.functions.convolution_2d."""
import importlib

import chainer
import chainer.functions as F
from chainer import gradient_check
import numpy
import pytest

import cpu_engine
from cpu_engine import onednn
from cpu_engine.channel_major import pair
from cpu_engine.convolution_2d import Convolution2DFunction
from cpu_engine_helper import assert_same
from cpu_engine_helper import is_channel_major
from cpu_engine_helper import is_channels_last
from cpu_engine_helper import layout
from cpu_engine_helper import run
from cpu_engine_helper import run_double
from cpu_engine_helper import TOL32

# The package's ``convolution_2d`` is the function; this is its module.
convolution_module = importlib.import_module('cpu_engine.convolution_2d')

CASES = [
    # (n, c, h, w, out_c, k, stride, pad)
    (2, 3, 9, 7, 5, 3, 1, 1),     # odd sizes, 'same' 3x3
    (2, 4, 11, 10, 6, 7, 2, 3),   # the stem: 7x7, stride 2, pad 3
    (1, 5, 8, 9, 3, 1, 2, 0),     # strided 1x1, batch 1
    (3, 4, 7, 7, 2, 1, 1, 0),     # plain 1x1
    (2, 3, 6, 5, 4, 3, 2, 0),     # strided 3x3, no padding
    (2, 3, 5, 5, 2, 1, 1, 1),     # padded 1x1
    (2, 3, 9, 9, 4, 3, 3, 2),     # stride 3, pad 2: uncovered borders
    (1, 2, 4, 6, 3, (2, 3), (1, 2), (1, 0)),  # rectangular everything
]


def onednn_or_skip(path):
    if path.startswith('onednn') and not onednn.available():
        pytest.skip('oneDNN is not installed')


@pytest.mark.parametrize('case', CASES)
@pytest.mark.parametrize('kind', ['nchw', 'channel-major', 'channels-last',
                                  'strided'])
@pytest.mark.parametrize('bias', [False, True])
@pytest.mark.parametrize('path', ['onednn-channels-last', 'rows', 'onednn',
                                  'onednn-gemm', 'numpy', 'numpy-chunked'])
def test_matches_chainer(case, kind, bias, path, monkeypatch):
    onednn_or_skip(path)
    # Channels-last activations: 'onednn-channels-last', every layer by
    # oneDNN's direct convolutions; 'rows', every
    # unpadded 1x1 layer by GEMMs of the rows. Channel-major ones:
    # 'onednn', direct convolutions of blocked copies on every layer,
    # however small; 'onednn-gemm', the GEMMs of im2col columns, by
    # oneDNN's sgemm; 'numpy', NumPy's GEMMs.
    min_pixels = {'onednn': 0, 'onednn-gemm': 10 ** 9}.get(path)
    if min_pixels is not None:
        monkeypatch.setattr(convolution_module, 'ONEDNN_MIN_PIXELS',
                            min_pixels)
        monkeypatch.setattr(convolution_module, 'ONEDNN_MIN_PIXELS_1X1',
                            min_pixels)
    monkeypatch.setattr(convolution_module, 'ROWS_MAX_PIXELS',
                        10 ** 9 if path == 'rows' else 0)
    if path == 'numpy-chunked':  # one image per im2col chunk
        monkeypatch.setattr(convolution_module, 'CHUNK_BYTES', 1)
    monkeypatch.setattr(onednn, '_primitives', {})
    n, c, h, w, out_c, k, stride, pad = case
    kh, kw = pair(k)
    rng = numpy.random.RandomState(0)
    x = layout(rng.standard_normal((n, c, h, w)).astype(numpy.float32), kind)
    arrays = [x, rng.standard_normal((out_c, c, kh, kw)).astype(
        numpy.float32)]
    if bias:
        arrays.append(rng.standard_normal(out_c).astype(numpy.float32))
    expected, _ = run(
        lambda *a: F.convolution_2d(*a, stride=stride, pad=pad), arrays)
    channels_last = path in ('onednn-channels-last', 'rows')
    with chainer.using_config('cpu_onednn', path not in ('numpy',
                                                         'numpy-chunked')), \
            chainer.using_config('cpu_channels_last', channels_last):
        actual, y = run(
            lambda *a: cpu_engine.convolution_2d(*a, stride=stride, pad=pad),
            arrays)
    assert isinstance(y.creator, Convolution2DFunction)
    is_layout = is_channels_last if channels_last else is_channel_major
    assert is_layout(y.array)
    assert is_layout(actual[1])
    # Forward, backward data and backward weights: three new primitives.
    one_by_one = pair(k) == (1, 1) and pair(pad) == (0, 0)
    strided_1x1 = pair(k) == (1, 1) and pair(stride) != (1, 1)
    direct = {'onednn-channels-last': True,
              'rows': not one_by_one,
              'onednn': not strided_1x1}.get(path, False)
    assert len(onednn._primitives) == (3 if direct else 0)
    assert_same(expected, actual)


@pytest.mark.parametrize('k, stride, pad, size, channel_major, last', [
    (3, 1, 1, 4, 'onednn', 'onednn'), (3, 1, 1, 3, 'columns', 'onednn'),
    (7, 2, 3, 8, 'onednn', 'onednn'), (1, 1, 0, 8, 'onednn', 'onednn'),
    (1, 1, 0, 7, 'columns', 'rows'), (1, 2, 0, 7, 'columns', 'rows'),
    (1, 2, 0, 8, 'columns', 'onednn'),
    (1, 1, 1, 7, 'columns', 'onednn')])
def test_each_layout_takes_the_paths_that_pay(k, stride, pad, size,
                                              channel_major, last):
    onednn_or_skip('onednn')
    x = numpy.zeros((2, 3, size * stride, size * stride), numpy.float32)
    W = numpy.zeros((4, 3, k, k), numpy.float32)
    args = (x, W, (stride, stride), (pad, pad), size, size)
    assert convolution_module._path(*args, False) == channel_major
    assert convolution_module._path(*args, True) == last
    with chainer.using_config('cpu_onednn', False):
        for layout_last in (False, True):
            assert convolution_module._path(*args, layout_last) == 'columns'
    assert convolution_module._path(
        x.astype(numpy.float64), *args[1:], True) == 'columns'


def test_onednn_primitives_are_reused(monkeypatch):
    onednn_or_skip('onednn')
    monkeypatch.setattr(onednn, '_primitives', {})
    rng = numpy.random.RandomState(3)
    x = rng.standard_normal((2, 3, 7, 7)).astype(numpy.float32)
    W = rng.standard_normal((4, 3, 3, 3)).astype(numpy.float32)
    cpu_engine.convolution_2d(x, W, pad=1)
    assert len(onednn._primitives) == 1
    y = cpu_engine.convolution_2d(x + 1, W, pad=1)
    assert len(onednn._primitives) == 1
    numpy.testing.assert_allclose(
        y.array, F.convolution_2d(x + 1, W, pad=1).array, **TOL32)


@pytest.mark.parametrize('case', [(2, 3, 5, 4, 2, 3, 1, 1),
                                  (1, 2, 5, 5, 3, 3, 2, 1),
                                  (2, 3, 4, 5, 2, 1, 2, 0)])
def test_gradient_check(case):
    n, c, h, w, out_c, k, stride, pad = case
    rng = numpy.random.RandomState(1)
    x = rng.standard_normal((n, c, h, w))
    W = rng.standard_normal((out_c, c, k, k))
    b = rng.standard_normal(out_c)
    y = cpu_engine.convolution_2d(x, W, b, stride, pad)
    gy = rng.standard_normal(y.shape)
    gradient_check.check_backward(
        lambda *a: cpu_engine.convolution_2d(*a, stride=stride, pad=pad),
        (x, W, b), gy, dtype=numpy.float64, atol=1e-6, rtol=1e-5)


def test_without_input_gradient():
    rng = numpy.random.RandomState(2)
    x = rng.standard_normal((2, 3, 8, 8)).astype(numpy.float32)
    W = chainer.Variable(rng.standard_normal((4, 3, 7, 7)).astype(
        numpy.float32))
    y = cpu_engine.convolution_2d(x, W, stride=2, pad=3)
    F.sum(y * y).backward()
    W0 = chainer.Variable(W.array.copy())
    F.sum(F.convolution_2d(x, W0, stride=2, pad=3) ** 2).backward()
    numpy.testing.assert_allclose(W.grad, W0.grad, **TOL32)


@pytest.mark.parametrize('kwargs', [dict(groups=2), dict(dilate=2),
                                    dict(cover_all=True)])
def test_falls_back_to_chainer(kwargs):
    rng = numpy.random.RandomState(3)
    x = rng.standard_normal((2, 4, 7, 7)).astype(numpy.float32)
    W = rng.standard_normal((4, 4 // kwargs.get('groups', 1), 3, 3)).astype(
        numpy.float32)
    y = cpu_engine.convolution_2d(x, W, None, 2, 1, **kwargs)
    assert not isinstance(y.creator, Convolution2DFunction)
    numpy.testing.assert_array_equal(
        y.array, F.convolution_2d(x, W, None, 2, 1, **kwargs).array)


# float16 results of the engine are float32 ones rounded once, Chainer's
# are float16 sums.
DOUBLE_TOL = {numpy.float16: dict(atol=1e-2, rtol=1e-2),
              numpy.float32: TOL32,
              numpy.float64: dict(atol=1e-10, rtol=1e-10)}


@pytest.mark.parametrize('case', CASES[:4] + CASES[-1:])
@pytest.mark.parametrize('bias', [False, True])
@pytest.mark.parametrize('dtype', [numpy.float16, numpy.float32,
                                   numpy.float64])
@pytest.mark.parametrize('path', ['onednn-channels-last', 'rows', 'onednn',
                                  'numpy'])
def test_double_backward_matches_chainer(case, bias, dtype, path,
                                         monkeypatch):
    onednn_or_skip(path)
    monkeypatch.setattr(convolution_module, 'ONEDNN_MIN_PIXELS', 0)
    monkeypatch.setattr(convolution_module, 'ONEDNN_MIN_PIXELS_1X1', 0)
    monkeypatch.setattr(convolution_module, 'ROWS_MAX_PIXELS',
                        10 ** 9 if path == 'rows' else 0)
    n, c, h, w, out_c, k, stride, pad = case
    kh, kw = pair(k)
    rng = numpy.random.RandomState(4)
    arrays = [layout(rng.standard_normal((n, c, h, w)).astype(dtype),
                     'channel-major'),
              rng.standard_normal((out_c, c, kh, kw)).astype(dtype)]
    if bias:
        arrays.append(rng.standard_normal(out_c).astype(dtype))
    expected = run_double(
        lambda *a: F.convolution_2d(*a, stride=stride, pad=pad), arrays)
    with chainer.using_config('cpu_onednn', path != 'numpy'), \
            chainer.using_config('cpu_channels_last',
                                 path in ('onednn-channels-last', 'rows')):
        actual = run_double(
            lambda *a: cpu_engine.convolution_2d(*a, stride=stride, pad=pad),
            arrays)
    assert_same(expected, actual, **DOUBLE_TOL[dtype])


@pytest.mark.parametrize('case', [(2, 3, 5, 4, 2, 3, 1, 1),
                                  (1, 2, 5, 5, 3, 3, 2, 1),
                                  (2, 3, 4, 5, 2, 1, 2, 0)])
@pytest.mark.parametrize('bias', [False, True])
def test_gradient_check_double_backward(case, bias):
    n, c, h, w, out_c, k, stride, pad = case
    rng = numpy.random.RandomState(5)
    arrays = [rng.standard_normal((n, c, h, w)),
              rng.standard_normal((out_c, c, k, k)),
              rng.standard_normal(out_c)][:3 if bias else 2]
    y = F.convolution_2d(*arrays, stride=stride, pad=pad)
    gradient_check.check_double_backward(
        lambda *a: cpu_engine.convolution_2d(*a, stride=stride, pad=pad),
        arrays, rng.standard_normal(y.shape),
        [rng.standard_normal(a.shape) for a in arrays],
        dtype=numpy.float64, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('x_shape,W_shape', [
    ((2, 0, 6, 6), (4, 0, 3, 3)),   # no input channels
    ((2, 3, 6, 6), (0, 3, 3, 3)),   # no output channels
    ((2, 0, 6, 6), (4, 0, 1, 1)),
    ((0, 3, 6, 6), (4, 3, 1, 1)),   # no images
])
@pytest.mark.parametrize('min_pixels', [None, 0])
def test_empty_operands_match_chainer(x_shape, W_shape, min_pixels,
                                      monkeypatch):
    if min_pixels is not None:  # every layer to oneDNN, where loaded
        for name in ('ONEDNN_MIN_PIXELS', 'ONEDNN_MIN_PIXELS_1X1',
                     'ROWS_MAX_PIXELS'):
            monkeypatch.setattr(convolution_module, name, min_pixels)
    rng = numpy.random.RandomState(0)
    x = rng.randn(*x_shape).astype(numpy.float32)
    W = rng.randn(*W_shape).astype(numpy.float32)
    b = numpy.ones(W_shape[0], numpy.float32)
    results = []
    for f in (cpu_engine.convolution_2d, F.convolution_2d):
        vx, vW = chainer.Variable(x), chainer.Variable(W)
        y = f(vx, vW, b, pad=W_shape[2] // 2)
        y.grad = numpy.ones_like(y.array)
        y.backward()
        results.append((y.array, vx.grad, vW.grad))
    for got, want in zip(*results):
        assert got.shape == want.shape
        numpy.testing.assert_allclose(got, want, **TOL32)


def test_delegates_to_chainers_own_function(monkeypatch):
    # A drop-in: with chainer.functions.convolution_2d replaced by the
    # engine's, what the engine passes on still reaches Chainer's own.
    monkeypatch.setattr(F, 'convolution_2d', cpu_engine.convolution_2d)
    x = numpy.ones((1, 4, 5, 5), numpy.float32)
    W = numpy.ones((2, 2, 3, 3), numpy.float32)
    y = F.convolution_2d(x, W, groups=2, cover_all=True)
    assert y.shape == (1, 2, 3, 3) and (y.array == 18).all()
