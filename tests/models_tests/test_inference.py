"""models.plain_copy: the trained network as ResNet50 on Chainer's links,
computing what the trained network computes in test mode."""
import functools

import chainer
import numpy
import pytest

import cpu_engine
import models
from models import chainer_layers
from models import FinalBatchNormalization
from models import ResNet50

N_CLASS, WIDTH = 5, 0.125


def trained(norm, layers=chainer_layers, wrap=lambda net: net):
    """A ResNet50 (``wrap``-ped) after two training-mode batches, so that its
    statistics are not the initial ones; its weights and betas perturbed off
    their initial values."""
    rng = numpy.random.RandomState(0)
    net = wrap(ResNet50(N_CLASS, norm=norm, layers=layers, width=WIDTH))
    for param in net.params():
        param.array[...] += rng.standard_normal(param.shape).astype(
            param.dtype) * 0.01
    for _ in range(2):
        net(rng.standard_normal((8, 3, 32, 32)).astype(numpy.float32))
    return net


def inputs():
    return numpy.random.RandomState(1).standard_normal(
        (2, 3, 32, 32)).astype(numpy.float32)


def predict(net, x):
    with chainer.using_config('train', False), \
            chainer.no_backprop_mode():
        return net(x).array


BUILD = functools.partial(ResNet50, N_CLASS, width=WIDTH)


@pytest.mark.parametrize('norm', [
    functools.partial(FinalBatchNormalization, variance='mean'),
    functools.partial(FinalBatchNormalization, variance='union'),
    chainer_layers.BatchNormalization])
def test_the_copy_computes_what_the_trained_network_does(norm):
    net = trained(norm)
    plain = models.plain_copy(net, BUILD)
    assert sum(isinstance(link, chainer.links.BatchNormalization)
               for link in plain.links()) == 53
    assert not any(isinstance(link, FinalBatchNormalization)
                   for link in plain.links())
    x = inputs()
    numpy.testing.assert_array_equal(predict(plain, x),
                                     predict(net, x))
    if norm is not chainer_layers.BatchNormalization:  # the last batch's
        mean, var = net.res3[0].bn2.statistics()
        numpy.testing.assert_array_equal(plain.res3[0].bn2.avg_mean, mean)
        numpy.testing.assert_array_equal(plain.res3[0].bn2.avg_var, var)


def test_a_copy_saved_loads_into_a_new_resnet50(tmp_path):
    net = trained(functools.partial(
        FinalBatchNormalization,
        batch_normalization=cpu_engine.batch_normalization),
        layers=cpu_engine)
    path = str(tmp_path / 'model.npz')
    chainer.serializers.save_npz(path, models.plain_copy(net, BUILD))
    loaded = ResNet50(N_CLASS, width=WIDTH)
    chainer.serializers.load_npz(path, loaded)  # strict: every array
    x = inputs()
    numpy.testing.assert_allclose(predict(loaded, x),
                                  predict(net, x), rtol=1e-3,
                                  atol=1e-3)  # the engine's rounding


def test_a_mixed16_network_is_copied_to_float32():
    with chainer.using_config('dtype', chainer.mixed16):
        net = trained(FinalBatchNormalization, wrap=models.MixedPrecision)
    assert net.network.conv1.W.dtype == numpy.float16
    plain = models.plain_copy(net, BUILD)
    params = dict(plain.namedparams())
    for name, param in net.network.namedparams():
        assert params[name].dtype == numpy.float32
        numpy.testing.assert_array_equal(params[name].array, param.array)
    links = dict(plain.namedlinks())
    for name, link in net.network.namedlinks():
        if isinstance(link, FinalBatchNormalization):
            mean, var = link.statistics()
            numpy.testing.assert_array_equal(links[name].avg_mean, mean)
            numpy.testing.assert_array_equal(links[name].avg_var, var)


@pytest.mark.parametrize('n_class, width', [(N_CLASS + 1, WIDTH),
                                            (N_CLASS, WIDTH * 2)])
def test_another_architecture_is_refused(n_class, width):
    with pytest.raises(ValueError, match='differ in their parameters'):
        models.plain_copy(trained(FinalBatchNormalization), functools.partial(
            ResNet50, n_class, width=width))
