"""cpu_engine's links are drop-ins for Chainer's."""
import chainer
import chainer.links as L
import numpy
import pytest

import cpu_engine
from cpu_engine.batch_normalization import BatchNormalizationReLU
from cpu_engine_helper import TOL32
import models


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


def test_normalization_links_take_relu():
    """``link(x, relu=True)`` is ``relu(link(x))`` for the links of both
    layer sets, in training and in test mode; the engine's fuses the pair
    in training."""
    rng = numpy.random.RandomState(10)
    x = rng.standard_normal((4, 3, 5, 5)).astype(numpy.float32)
    for link in (cpu_engine.BatchNormalization(3),
                 models.chainer_layers.BatchNormalization(3)):
        for train in (True, False):
            with chainer.using_config('train', train):
                expected = chainer.functions.relu(link(x)).array
                y = link(x, relu=True)
            numpy.testing.assert_allclose(y.array, expected, **TOL32)
            assert (y.array == 0).any()
    with chainer.using_config('train', True):
        fused = cpu_engine.BatchNormalization(3)(x, relu=True)
    assert isinstance(fused.creator, BatchNormalizationReLU)


def test_batch_normalization_link_takes_chainers_arguments():
    """``finetune=False`` is training mode (the engine's node, as Chainer's
    own link tests call it); ``finetune=True`` and unknown or removed
    arguments go to Chainer's link; nothing but ``x`` goes by position."""
    rng = numpy.random.RandomState(11)
    x = rng.standard_normal((4, 3, 5, 5)).astype(numpy.float32)
    ours, theirs = cpu_engine.BatchNormalization(3), L.BatchNormalization(3)
    y = ours(x, finetune=False)
    assert type(y.creator._impl).__module__ == 'cpu_engine.batch_normalization'
    numpy.testing.assert_allclose(y.array, theirs(x, finetune=False).array,
                                  **TOL32)
    numpy.testing.assert_allclose(ours.avg_var, theirs.avg_var, **TOL32)
    ours(x, finetune=True)
    assert ours.N == 1
    with pytest.raises(TypeError):
        ours(x, True)
    with pytest.raises(TypeError):
        ours(x, unknown_argument=1)
    with pytest.raises(ValueError):
        ours(x, test=True)
