"""cpu_engine.relu and add_relu against chainer.functions.relu."""
import chainer
import chainer.functions as F
from chainer import gradient_check
import numpy
import pytest

import cpu_engine
from cpu_engine.relu import ReLU
from cpu_engine_helper import assert_same
from cpu_engine_helper import KERNELS
from cpu_engine_helper import layout
from cpu_engine_helper import run
from cpu_engine_helper import run_double
from cpu_engine_helper import use_kernels


@pytest.mark.parametrize('shape', [(2, 3, 5, 4), (3, 70001), (4, 64, 9, 9)])
@pytest.mark.parametrize('kind', ['same', 'mixed'])
@pytest.mark.parametrize('kernels', KERNELS)
def test_relu_and_add_relu_match_chainer(shape, kind, kernels, monkeypatch):
    use_kernels(kernels, monkeypatch)
    rng = numpy.random.RandomState(13)
    a = rng.standard_normal(shape).astype(numpy.float32)
    b = rng.standard_normal(shape).astype(numpy.float32)
    if len(shape) == 4:
        a = layout(a, 'channel-major')
        b = layout(b, 'channel-major' if kind == 'same' else 'strided')
    expected, _ = run(lambda u: F.relu(u), [a])
    actual, y = run(cpu_engine.relu, [a])
    assert isinstance(y.creator, ReLU)
    assert y.array.strides == a.strides
    assert_same(expected, actual, atol=0, rtol=0)
    expected, _ = run(lambda u, v: F.relu(u + v), [a, b])
    actual, y = run(cpu_engine.add_relu, [a, b])
    assert isinstance(y.creator, ReLU)
    assert_same(expected, actual, atol=0, rtol=0)


@pytest.mark.parametrize('dtype', [numpy.float16, numpy.float32,
                                   numpy.float64])
@pytest.mark.parametrize('kernels', KERNELS)
def test_double_backward_matches_chainer(dtype, kernels, monkeypatch):
    use_kernels(kernels, monkeypatch)
    rng = numpy.random.RandomState(14)
    a, b = [layout(rng.standard_normal((3, 4, 5, 6)).astype(dtype),
                   'channel-major') for _ in range(2)]
    assert_same(run_double(F.relu, [a]), run_double(cpu_engine.relu, [a]),
                atol=0, rtol=0)
    assert_same(run_double(lambda u, v: F.relu(u + v), [a, b]),
                run_double(cpu_engine.add_relu, [a, b]), atol=0, rtol=0)


def test_gradient_check_double_backward():
    rng = numpy.random.RandomState(15)
    x = rng.uniform(0.1, 1, (2, 3, 4, 5)) * rng.choice([-1, 1], (2, 3, 4, 5))
    shortcut = rng.standard_normal(x.shape)
    gy, ggx, ggs = [rng.standard_normal(x.shape) for _ in range(3)]
    gradient_check.check_double_backward(
        cpu_engine.relu, x, gy, ggx, dtype=numpy.float64)
    gradient_check.check_double_backward(
        cpu_engine.add_relu, (x - shortcut, shortcut), gy, (ggx, ggs),
        dtype=numpy.float64)


def test_delegates_to_chainers_own_function(monkeypatch):
    # A drop-in: with chainer.functions.relu replaced by the engine's, what
    # the engine passes on (everything, with its fast paths off) still
    # reaches Chainer's own.
    monkeypatch.setattr(F, 'relu', cpu_engine.relu)
    x = numpy.array([-1., 2.], numpy.float32)
    with chainer.using_config('cpu_fast_paths', False):
        y = F.relu(x)
        z = cpu_engine.add_relu(x, x)
    assert y.creator.__module__.startswith('chainer.')
    numpy.testing.assert_array_equal(y.array, [0, 2])
    numpy.testing.assert_array_equal(z.array, [0, 4])
