"""cpu_engine.fork: two reads of one activation, their gradients summed."""
import chainer
import chainer.functions as F
import numpy
import pytest

import cpu_engine
from cpu_engine.fork import Fork
from cpu_engine_helper import KERNELS
from cpu_engine_helper import layout
from cpu_engine_helper import run_double
from cpu_engine_helper import use_kernels


def _reads(fork, x):
    """``relu(a) * 2 + b ** 2`` of the two reads ``a, b = fork(x)``."""
    a, b = fork(x)
    return F.relu(a) * 2 + b ** 2


@pytest.mark.parametrize('kind', ['nchw', 'channel-major', 'channels-last',
                                  'strided'])
@pytest.mark.parametrize('dtype', [numpy.float32, numpy.float16,
                                   numpy.float64])
@pytest.mark.parametrize('kernels', KERNELS)
def test_gradient_is_the_sum_of_both(kind, dtype, kernels, monkeypatch):
    use_kernels(kernels, monkeypatch)
    rng = numpy.random.RandomState(3)
    x = layout(rng.standard_normal((3, 5, 4, 4)).astype(dtype), kind)
    grads = []
    for fork in (cpu_engine.fork, lambda x: (x, x)):
        v = chainer.Variable(x.copy(order='K'))
        F.sum(_reads(fork, v)).backward()
        grads.append(v.grad)
    numpy.testing.assert_array_equal(*grads)
    a, b = cpu_engine.fork(x)
    assert isinstance(a.creator, Fork) and a.array is b.array is x


def test_one_read_passes_its_gradient_through():
    x = chainer.Variable(numpy.arange(6, dtype=numpy.float32).reshape(
        1, 6, 1, 1))
    a, _ = cpu_engine.fork(x)
    F.sum(a * 3).backward()
    numpy.testing.assert_array_equal(x.grad, numpy.full((1, 6, 1, 1), 3.))


def test_second_order_gradients_are_chainers():
    x = numpy.random.RandomState(4).standard_normal((2, 3, 2, 2)).astype(
        numpy.float32)
    results = [run_double(lambda v: _reads(fork, v), [x])
               for fork in (cpu_engine.fork, lambda v: (v, v))]
    for ours, theirs in zip(*results):
        numpy.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_other_arrays_are_returned_as_they_are():
    x = chainer.Variable(numpy.ones((2, 3), numpy.float32))
    with chainer.using_config('cpu_fast_paths', False):
        assert cpu_engine.fork(x) == (x, x)
