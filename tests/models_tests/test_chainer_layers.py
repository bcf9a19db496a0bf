"""models.chainer_layers and cpu_engine are layer sets with the same names."""
import chainer.functions as F
import numpy
import pytest

import cpu_engine
from models import chainer_layers

NAMES = ('Convolution2D', 'BatchNormalization', 'batch_normalization',
         'relu', 'add_relu', 'max_pooling_2d')


@pytest.mark.parametrize('layers', [chainer_layers, cpu_engine])
def test_layer_set_has_every_name(layers):
    assert all(callable(getattr(layers, name)) for name in NAMES)


def test_add_relu_is_relu_of_the_sum():
    rng = numpy.random.RandomState(0)
    h, shortcut = rng.standard_normal((2, 2, 3, 4, 4)).astype(numpy.float32)
    numpy.testing.assert_array_equal(
        chainer_layers.add_relu(h, shortcut).array,
        F.relu(h + shortcut).array)
