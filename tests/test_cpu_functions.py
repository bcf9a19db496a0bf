"""CPU fast paths of ``cpu_engine`` against Chainer's own implementations."""
import importlib
import os
import platform
import subprocess
import sys

import chainer
import chainer.functions as F
import chainer.links as L
from chainer import gradient_check
import numpy
import pytest

import cpu_engine
from cpu_engine import cpu_runtime
from cpu_engine import onednn
from cpu_engine.batch_normalization import ChannelMajorBatchNormalizationImpl
from cpu_engine.channel_major import channel_major
from cpu_engine.channel_major import im2col
from cpu_engine.channel_major import pair
from cpu_engine.convolution_2d import Convolution2DFunction
from cpu_engine.max_pooling_2d import MaxPooling2D
from cpu_engine.relu import ReLU
from models import ResNet50

convolution_module = importlib.import_module('cpu_engine.convolution_2d')

TOL32 = dict(atol=1e-4, rtol=1e-4)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _layout(x, layout):
    """``x`` stored NCHW, channel-major, or as a strided (sliced) view."""
    if layout == 'nchw':
        return numpy.ascontiguousarray(x)
    if layout == 'channel-major':
        return numpy.ascontiguousarray(x.transpose(1, 0, 2, 3)).transpose(
            1, 0, 2, 3)
    wide = numpy.zeros(x.shape[:3] + (2 * x.shape[3],), x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


def _run(f, arrays, gy_seed=7):
    """Outputs and input gradients of ``f(*arrays)`` for a fixed ``gy``."""
    variables = [chainer.Variable(a.copy(order='K')) for a in arrays]
    y = f(*variables)
    y.grad = numpy.random.RandomState(gy_seed).standard_normal(
        y.shape).astype(y.dtype)
    y.backward()
    return [y.array] + [v.grad for v in variables], y


def _assert_same(expected, actual, **tol):
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert e.shape == a.shape
        numpy.testing.assert_allclose(a, e, **(tol or TOL32))


def _assert_prints_ok(code):
    """Runs Python ``code`` in a fresh process; it must print just 'ok'."""
    out = subprocess.run([sys.executable, '-c', code], cwd=REPO,
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=REPO))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'ok'


def _is_channel_major(a):
    return a.transpose(1, 0, 2, 3).flags.c_contiguous


# --- convolution -----------------------------------------------------------

CONV_CASES = [
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


def _onednn_or_skip(path):
    if path.startswith('onednn') and not onednn.available():
        pytest.skip('oneDNN is not installed')


@pytest.mark.parametrize('case', CONV_CASES)
@pytest.mark.parametrize('layout', ['nchw', 'channel-major', 'strided'])
@pytest.mark.parametrize('bias', [False, True])
@pytest.mark.parametrize('path', ['onednn', 'onednn-gemm', 'numpy',
                                  'numpy-chunked'])
def test_convolution_matches_chainer(case, layout, bias, path, monkeypatch):
    _onednn_or_skip(path)
    # 'onednn': direct convolutions on every layer, however small;
    # 'onednn-gemm': the GEMMs of im2col columns, by oneDNN's sgemm.
    min_pixels = {'onednn': 0, 'onednn-gemm': 10 ** 9}.get(path)
    if min_pixels is not None:
        monkeypatch.setattr(convolution_module, 'ONEDNN_MIN_PIXELS',
                            min_pixels)
        monkeypatch.setattr(convolution_module, 'ONEDNN_MIN_PIXELS_1X1',
                            min_pixels)
    if path == 'numpy-chunked':  # one image per im2col chunk
        monkeypatch.setattr(convolution_module, 'CHUNK_BYTES', 1)
    monkeypatch.setattr(onednn, '_primitives', {})
    n, c, h, w, out_c, k, stride, pad = case
    kh, kw = pair(k)
    rng = numpy.random.RandomState(0)
    x = _layout(rng.standard_normal((n, c, h, w)).astype(numpy.float32),
                layout)
    arrays = [x, rng.standard_normal((out_c, c, kh, kw)).astype(
        numpy.float32)]
    if bias:
        arrays.append(rng.standard_normal(out_c).astype(numpy.float32))
    expected, _ = _run(
        lambda *a: F.convolution_2d(*a, stride=stride, pad=pad), arrays)
    with chainer.using_config('cpu_onednn', path.startswith('onednn')):
        actual, y = _run(
            lambda *a: cpu_engine.convolution_2d(*a, stride=stride, pad=pad),
            arrays)
    assert isinstance(y.creator, Convolution2DFunction)
    assert _is_channel_major(y.array)
    assert _is_channel_major(actual[1])
    # Forward, backward data and backward weights: three new primitives.
    strided_1x1 = pair(k) == (1, 1) and pair(stride) != (1, 1)
    assert len(onednn._primitives) == (
        3 if path == 'onednn' and not strided_1x1 else 0)
    _assert_same(expected, actual)


@pytest.mark.parametrize('m, k, n', [(5, 7, 3), (64, 300, 129), (1, 1, 1),
                                     (3, 0, 4), (0, 2, 3)])
def test_onednn_matmul_matches_numpy(m, k, n):
    _onednn_or_skip('onednn')
    rng = numpy.random.RandomState(4)
    a = rng.standard_normal((m, k)).astype(numpy.float32)
    b = rng.standard_normal((k, n)).astype(numpy.float32)
    # Plain, transposed, and strided in both axes (copied) operands.
    wide = numpy.zeros((2 * k, 2 * n), numpy.float32)
    wide[::2, ::2] = b
    for a_ in (a, numpy.asfortranarray(a)):
        for b_ in (b, numpy.asfortranarray(b), wide[::2, ::2]):
            numpy.testing.assert_allclose(onednn.matmul(a_, b_), a.dot(b),
                                          **TOL32)
    out = numpy.full((m, n + 5), 7, numpy.float32)
    onednn.matmul(a, b, out[:, 2:2 + n])
    numpy.testing.assert_allclose(out[:, 2:2 + n], a.dot(b), **TOL32)
    assert (out[:, :2] == 7).all() and (out[:, 2 + n:] == 7).all()


def test_onednn_is_loaded_where_its_wheel_installs():
    if not (sys.platform.startswith('linux')
            and platform.machine() == 'x86_64'):
        pytest.skip('onednn-cpu-gomp has wheels for x86-64 Linux only')
    assert onednn.available()


@pytest.mark.parametrize('k, stride, size, expected', [
    (3, 1, 4, True), (3, 1, 3, False), (7, 2, 8, True),
    (1, 1, 8, True), (1, 1, 7, False), (1, 2, 16, False)])
def test_onednn_takes_the_layers_where_it_pays(k, stride, size, expected):
    _onednn_or_skip('onednn')
    x = numpy.zeros((2, 3, size * stride, size * stride), numpy.float32)
    W = numpy.zeros((4, 3, k, k), numpy.float32)
    assert convolution_module._uses_onednn(
        x, W, (stride, stride), size, size) is expected
    with chainer.using_config('cpu_onednn', False):
        assert not convolution_module._uses_onednn(
            x, W, (stride, stride), size, size)
    assert not convolution_module._uses_onednn(
        x.astype(numpy.float64), W, (stride, stride), size, size)


def test_onednn_primitives_are_reused(monkeypatch):
    _onednn_or_skip('onednn')
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
def test_convolution_gradient_check(case):
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


def test_convolution_without_input_gradient():
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
def test_convolution_falls_back_to_chainer(kwargs):
    rng = numpy.random.RandomState(3)
    x = rng.standard_normal((2, 4, 7, 7)).astype(numpy.float32)
    W = rng.standard_normal((4, 4 // kwargs.get('groups', 1), 3, 3)).astype(
        numpy.float32)
    y = cpu_engine.convolution_2d(x, W, None, 2, 1, **kwargs)
    assert not isinstance(y.creator, Convolution2DFunction)
    numpy.testing.assert_array_equal(
        y.array, F.convolution_2d(x, W, None, 2, 1, **kwargs).array)


def test_fast_paths_switch_off_with_config():
    rng = numpy.random.RandomState(4)
    x = rng.standard_normal((2, 3, 5, 5)).astype(numpy.float32)
    W = rng.standard_normal((2, 3, 3, 3)).astype(numpy.float32)
    with chainer.using_config('cpu_fast_paths', False):
        assert not isinstance(cpu_engine.convolution_2d(x, W).creator,
                              Convolution2DFunction)
        assert not isinstance(cpu_engine.relu(x).creator, ReLU)
        assert not isinstance(cpu_engine.max_pooling_2d(x, 2).creator,
                              MaxPooling2D)
    assert isinstance(cpu_engine.convolution_2d(x, W).creator,
                      Convolution2DFunction)


def test_im2col_matches_a_padded_reference():
    rng = numpy.random.RandomState(5)
    xc = rng.standard_normal((2, 3, 5, 6)).astype(numpy.float32)
    # asymmetric: 1 row of padding on top, 3 below; -1 column (cropped).
    col = im2col(xc, 3, 2, 2, 1, 1, -1, 4, 4).reshape(2, 3, 2, 3, 4, 4)
    padded = numpy.zeros((2, 3, 5 + 1 + 3, 6 + 5), numpy.float32)
    padded[:, :, 1:6, :5] = xc[:, :, :, 1:]
    for i in range(3):
        for j in range(2):
            numpy.testing.assert_array_equal(
                col[:, i, j], padded[:, :, i:i + 7:2, j:j + 4])


# --- batch normalization ---------------------------------------------------

BN_SHAPES = [(2, 3, 5, 4), (1, 7, 3, 3), (4, 19, 1, 1), (3, 300, 2, 3),
             (8, 64, 16, 16)]  # the last: several cache blocks


@pytest.fixture(params=['native', 'numpy'])
def kernels(request, monkeypatch):
    """Runs a test with the C loops of cpu_engine._kernels and without."""
    if request.param == 'native':
        if cpu_runtime.kernels is None:
            pytest.skip('cpu_engine._kernels is not built')
    else:
        monkeypatch.setattr(cpu_runtime, 'kernels', None)
    return request.param


@pytest.mark.parametrize('shape', BN_SHAPES)
@pytest.mark.parametrize('layout', ['nchw', 'channel-major', 'strided'])
@pytest.mark.parametrize('decay', [0.7, 0.0])
def test_batch_normalization_matches_chainer(shape, layout, decay, kernels):
    rng = numpy.random.RandomState(6)
    x = _layout((rng.standard_normal(shape) * 3 + 1).astype(numpy.float32),
                layout)
    gamma = (rng.rand(shape[1]) + 0.5).astype(numpy.float32)
    beta = rng.standard_normal(shape[1]).astype(numpy.float32)
    results = []
    for f in (F.batch_normalization, cpu_engine.batch_normalization):
        stats = [numpy.zeros(shape[1], numpy.float32),
                 numpy.ones(shape[1], numpy.float32)]
        out, y = _run(lambda *a: f(*a, eps=2e-5, running_mean=stats[0],
                                   running_var=stats[1], decay=decay),
                      [x, gamma, beta])
        results.append(out + stats)
    assert isinstance(y.creator._impl, ChannelMajorBatchNormalizationImpl)
    assert _is_channel_major(y.array)
    _assert_same(*results, atol=1e-4, rtol=1e-3)


def test_batch_normalization_keeps_chainers_statistics(kernels):
    """mean, var (biased) and inv_std, which the gradient nodes reuse."""
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


def _pooling(name, lengths, dtypes, stride=2):
    """A call of the C loop ``name`` on zero buffers of these lengths and
    dtypes, for a 2x2 window of stride ``stride`` over 2x2 planes."""
    arrays = [numpy.zeros(n, d) for n, d in zip(lengths, dtypes)]
    return lambda k: getattr(k, name)(*arrays, 2, 2, 1, 1, 2, 2, stride,
                                      stride, 0, 0)


@pytest.mark.skipif(cpu_runtime.kernels is None,
                    reason='cpu_engine._kernels is not built')
@pytest.mark.parametrize('call, error, message', [
    (lambda k: k.rmsprop_warmup(*[numpy.zeros(4)] * 4, 1, .9, .99, 1e-8,
                                1, 0), TypeError, "float32, got format 'd'"),
    (lambda k: k.rmsprop_warmup(*[numpy.zeros((4, 2), numpy.float32).T] * 4,
                                1, .9, .99, 1e-8, 1, 0), ValueError,
     'contiguous'),
    (lambda k: k.rmsprop_warmup(*[numpy.zeros(4, numpy.float32)] * 3,
                                numpy.zeros(5, numpy.float32),
                                1, .9, .99, 1e-8, 1, 0), ValueError,
     'lengths'),
    (lambda k: k.weight_decay(numpy.zeros(4, numpy.float32),
                              numpy.zeros(5, numpy.float32), 0.1),
     ValueError, 'lengths'),
    (lambda k: k.weight_decay(numpy.zeros(4, numpy.float32)[::2],
                              numpy.zeros(2, numpy.float32), 0.1),
     ValueError, 'contiguous'),
    (lambda k: k.bn_forward(numpy.zeros(6, numpy.float32),
                            *[numpy.zeros(4, numpy.float32)] * 2, 1e-5,
                            *[numpy.zeros(4, numpy.float32)] * 4),
     ValueError, 'lengths'),
    (lambda k: k.bn_backward(*[numpy.zeros(6, numpy.float32)] * 5,
                             numpy.zeros(6, numpy.float32)[::-1],
                             *[numpy.zeros(6, numpy.float32)] * 2),
     ValueError, 'contiguous'),
    (lambda k: k.relu(*[numpy.zeros(6, numpy.float32)] * 2,
                      numpy.zeros(5, numpy.float32)), ValueError, 'lengths'),
    (lambda k: k.relu_grad(numpy.zeros(6, numpy.float32), numpy.zeros(6),
                           numpy.zeros(6, numpy.float32)), TypeError,
     'float32'),
    (_pooling('max_pool', (8, 2, 2, 4), 'fffB'), TypeError, 'uint8'),
    (_pooling('max_pool', (8, 2, 2, 4), 'ffBB', stride=0), ValueError,
     'window'),
    (_pooling('max_pool_grad', (3, 2, 4, 8), 'fBBf'), ValueError, 'lengths'),
])
def test_kernels_reject_bad_buffers(call, error, message):
    with pytest.raises(error, match=message):
        call(cpu_runtime.kernels)


def test_works_without_kernels():
    """The package imports and trains when the extension is not built."""
    code = ('import sys; sys.modules["cpu_engine._kernels"] = None; '
            'import chainer, numpy, cpu_engine, optimizers; '
            'assert cpu_engine.cpu_runtime.kernels is None; '
            'x = numpy.arange(96, dtype=numpy.float32).reshape(2, 3, 4, 4); '
            'link = cpu_engine.BatchNormalization(3); '
            'opt = optimizers.RMSpropWarmup(); opt.setup(link); '
            'opt.update(lambda: chainer.functions.sum(link(x) * x)); '
            'print("ok")')
    _assert_prints_ok(code)


def test_batch_normalization_gradient_check_and_double_backward():
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


def test_batch_normalization_other_ranks_use_chainer():
    rng = numpy.random.RandomState(8)
    x = rng.standard_normal((5, 3)).astype(numpy.float32)
    gamma, beta = numpy.ones(3, numpy.float32), numpy.zeros(3, numpy.float32)
    y = cpu_engine.batch_normalization(x, gamma, beta)
    assert not isinstance(y.creator._impl, ChannelMajorBatchNormalizationImpl)
    numpy.testing.assert_allclose(
        y.array, F.batch_normalization(x, gamma, beta).array, **TOL32)


def test_batch_normalization_link_is_chainers():
    rng = numpy.random.RandomState(9)
    x = rng.standard_normal((4, 3, 5, 5)).astype(numpy.float32)
    ours, theirs = cpu_engine.BatchNormalization(3), L.BatchNormalization(3)
    assert [n for n, _ in ours.namedparams()] == [
        n for n, _ in theirs.namedparams()]
    assert ours._persistent == theirs._persistent
    for _ in range(2):
        numpy.testing.assert_allclose(ours(x).array, theirs(x).array,
                                      **TOL32)
    numpy.testing.assert_allclose(ours.avg_mean, theirs.avg_mean, **TOL32)
    numpy.testing.assert_allclose(ours.avg_var, theirs.avg_var, **TOL32)
    with chainer.using_config('train', False):
        numpy.testing.assert_allclose(ours(x).array, theirs(x).array,
                                      **TOL32)


# --- max pooling, ReLU -----------------------------------------------------

@pytest.mark.parametrize('shape,k,stride,pad,cover_all', [
    ((2, 3, 9, 9), 3, 2, 0, True),    # the model's stem pooling
    ((2, 3, 9, 9), 3, 2, 1, False),
    ((1, 4, 8, 7), 2, None, 0, True),
    ((2, 2, 7, 7), 3, 1, 1, True),
    ((2, 3, 11, 10), 3, 2, 1, True),
    ((4, 16, 33, 30), 3, 2, 1, False),  # split over threads
    ((1, 2, 3, 3), 3, 2, 2, True),      # windows wholly in the padding
])
@pytest.mark.parametrize('layout', ['nchw', 'channel-major'])
def test_max_pooling_matches_chainer(shape, k, stride, pad, cover_all,
                                     layout, kernels):
    rng = numpy.random.RandomState(10)
    x = rng.standard_normal(shape).astype(numpy.float32)
    x[0, 0, :3, :3] = 1.0  # ties: the first maximum gets the gradient
    x = _layout(x, layout)
    expected, _ = _run(lambda a: F.max_pooling_2d(a, k, stride, pad,
                                                  cover_all), [x])
    actual, y = _run(lambda a: cpu_engine.max_pooling_2d(a, k, stride, pad,
                                                        cover_all), [x])
    assert isinstance(y.creator, MaxPooling2D)
    assert _is_channel_major(y.array)
    _assert_same(expected, actual, atol=0, rtol=0)


def test_max_pooling_gradient_check():
    x = numpy.random.RandomState(11).permutation(2 * 2 * 7 * 6).reshape(
        2, 2, 7, 6).astype(numpy.float64)
    gy = numpy.random.RandomState(12).standard_normal((2, 2, 4, 3))
    gradient_check.check_backward(
        lambda a: cpu_engine.max_pooling_2d(a, 3, 2, 1, False), x, gy,
        dtype=numpy.float64, eps=1e-3, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('shape', [(2, 3, 5, 4), (3, 70001), (4, 64, 9, 9)])
@pytest.mark.parametrize('layout', ['same', 'mixed'])
def test_relu_and_add_relu_match_chainer(shape, layout, kernels):
    rng = numpy.random.RandomState(13)
    a = rng.standard_normal(shape).astype(numpy.float32)
    b = rng.standard_normal(shape).astype(numpy.float32)
    if len(shape) == 4:
        a = _layout(a, 'channel-major')
        b = _layout(b, 'channel-major' if layout == 'same' else 'strided')
    expected, _ = _run(lambda u: F.relu(u), [a])
    actual, y = _run(cpu_engine.relu, [a])
    assert isinstance(y.creator, ReLU)
    assert y.array.strides == a.strides
    _assert_same(expected, actual, atol=0, rtol=0)
    expected, _ = _run(lambda u, v: F.relu(u + v), [a, b])
    actual, y = _run(cpu_engine.add_relu, [a, b])
    assert isinstance(y.creator, ReLU)
    _assert_same(expected, actual, atol=0, rtol=0)


# --- links, model, runtime -------------------------------------------------

def test_convolution_link_is_a_drop_in(tmp_path):
    rng = numpy.random.RandomState(14)
    x = rng.standard_normal((2, 3, 6, 6)).astype(numpy.float32)
    theirs = L.Convolution2D(3, 4, 3, 1, 1)
    chainer.serializers.save_npz(str(tmp_path / 'conv.npz'), theirs)
    ours = cpu_engine.Convolution2D(3, 4, 3, 1, 1)
    chainer.serializers.load_npz(str(tmp_path / 'conv.npz'), ours)
    assert isinstance(ours, L.Convolution2D)
    assert [(n, p.shape) for n, p in ours.namedparams()] == [
        (n, p.shape) for n, p in theirs.namedparams()]
    numpy.testing.assert_allclose(ours(x).array, theirs(x).array, **TOL32)
    lazy = cpu_engine.Convolution2D(None, 4, 3)
    assert lazy(x).shape == (2, 4, 4, 4) and lazy.W.shape == (4, 3, 3, 3)


def test_resnet50_step_matches_chainer_functions():
    # In float64: a freshly initialized ResNet-50 at this size amplifies
    # float32 rounding to a few percent in either implementation.
    with chainer.using_config('dtype', numpy.float64):
        model = ResNet50(n_class=10)
    rng = numpy.random.RandomState(15)
    x = rng.standard_normal((2, 3, 40, 40))
    t = numpy.array([1, 7], numpy.int32)
    results = []
    for fast in (True, False):
        model.cleargrads()
        with chainer.using_config('cpu_fast_paths', fast):
            loss = F.softmax_cross_entropy(model(x), t)
            loss.backward()
        results.append([loss.array] + [p.grad.copy() for _, p in sorted(
            model.namedparams())])
    for fast, stock in zip(*results):
        numpy.testing.assert_allclose(
            fast, stock, rtol=1e-7, atol=1e-9 * numpy.abs(stock).max())


def test_configure_keeps_buffers_and_is_idempotent():
    code = ('from cpu_engine import cpu_runtime; '
            's = cpu_runtime.configure(); '
            'assert s is cpu_runtime.configure(); '
            'assert s["M_MMAP_THRESHOLD"] >= 32 << 20, s; print("ok")')
    _assert_prints_ok(code)


def test_parallel_for_covers_the_range_once(monkeypatch):
    monkeypatch.setenv('OMP_NUM_THREADS', '3')
    assert cpu_runtime.num_threads() == 3
    hits = numpy.zeros(10, int)

    def mark(lo, hi):
        hits[lo:hi] += 1
    cpu_runtime.parallel_for(mark, 10)
    assert (hits == 1).all()
    cpu_runtime.parallel_for(mark, 1)
    assert hits[0] == 2

    def fail(lo, hi):
        if lo > 0:
            raise RuntimeError('block {}'.format(lo))
    with pytest.raises(RuntimeError, match='block'):
        cpu_runtime.parallel_for(fail, 10)
    monkeypatch.setenv('OMP_NUM_THREADS', 'two')
    with pytest.raises(ValueError, match='OMP_NUM_THREADS'):
        cpu_runtime.num_threads()


def test_channel_major_is_a_view_when_it_can_be():
    x = _layout(numpy.ones((2, 3, 4, 5), numpy.float32), 'channel-major')
    assert numpy.shares_memory(channel_major(x), x)
    y = numpy.ones((2, 3, 4, 5), numpy.float32)
    assert channel_major(y).flags.c_contiguous
    assert not numpy.shares_memory(channel_major(y), y)


def test_train_step_benchmark_runs(capsys, monkeypatch):
    from benchmarks import train_step
    monkeypatch.setattr(train_step, 'PEAK_N', 256)
    monkeypatch.setattr(train_step, 'TRANSFORM_REPEATS', 5)
    train_step.main(['--sizes', '32', '--batchsize', '2', '--steps', '1',
                     '--rounds', '1', '--stock', '--no-torch',
                     '--transform'])
    out = capsys.readouterr().out
    assert 'GEMM peak' in out and 'of peak' in out
    assert 'chainer / chainer-stock' in out
    assert 'training transform, 32 px crop' in out
