"""cpu_engine.relu and add_relu against chainer.functions.relu."""
import chainer.functions as F
import numpy
import pytest

import cpu_engine
from cpu_engine.relu import ReLU
from cpu_engine_helper import assert_same
from cpu_engine_helper import KERNELS
from cpu_engine_helper import layout
from cpu_engine_helper import run
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
