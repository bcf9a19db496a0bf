"""models.FinalBatchNormalization: training, test mode, micro-batch windows."""
import chainer
import chainer.functions as F
import chainer.links as L
import numpy
import pytest

import cpu_engine
import models
from cpu_engine.batch_normalization import NumPyBatchNormalizationImpl
from models import FinalBatchNormalization
from models import ResNet50
from models import zero_init_residual


def batch(seed, shape=(4, 3, 2, 2), shift=0.):
    rng = numpy.random.RandomState(seed)
    return (rng.standard_normal(shape) * (seed + 1) + shift).astype(
        numpy.float32)


def normalized(x, mean, var, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / numpy.sqrt(var.reshape(shape) + eps)


def test_training_matches_batch_normalization_and_keeps_statistics():
    x = batch(0, shift=2.)
    gy = batch(1)
    ours = FinalBatchNormalization(3)
    reference = L.BatchNormalization(3)
    outputs = []
    for link in (ours, reference):
        xv = chainer.Variable(x.copy())
        y = link(xv)
        y.grad = gy
        y.backward()
        outputs.append((y.array, xv.grad, link.gamma.grad, link.beta.grad))
    for a, b in zip(*outputs):
        numpy.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    numpy.testing.assert_allclose(ours.batch_mean, x.mean(axis=(0, 2, 3)),
                                  rtol=1e-6)
    numpy.testing.assert_allclose(ours.batch_var, x.var(axis=(0, 2, 3)),
                                  rtol=1e-5)
    numpy.testing.assert_allclose(ours.batch_mean_sq,
                                  x.mean(axis=(0, 2, 3)) ** 2, rtol=1e-5)


@pytest.mark.parametrize('variance', ['mean', 'union'])
def test_test_mode_normalizes_with_the_kept_statistics(variance):
    link = FinalBatchNormalization(3, variance=variance)
    x = batch(2, shift=-1.)
    y_train = link(x).array
    with chainer.using_config('train', False):
        assert link(x).array == pytest.approx(y_train, abs=1e-5)
        other = batch(3)
        mean, var = link.statistics()
        numpy.testing.assert_allclose(
            link(other).array, normalized(other, mean, var, link.eps),
            rtol=1e-5, atol=1e-5)
    numpy.testing.assert_allclose(link.batch_mean, x.mean(axis=(0, 2, 3)),
                                  rtol=1e-6)


def test_micro_batch_windows_average_their_batches():
    link = FinalBatchNormalization(3, variance='union', micro_batches=3)
    first = [batch(i, shift=i) for i in range(3)]
    second = [batch(10 + i, shift=-i) for i in range(3)]
    for windows_done, window in enumerate((first, second)):
        for x in window:
            link(x)
        union = numpy.concatenate(window)
        mean, var = link.statistics()
        numpy.testing.assert_allclose(mean, union.mean(axis=(0, 2, 3)),
                                      rtol=1e-5, atol=1e-6)
        numpy.testing.assert_allclose(var, union.var(axis=(0, 2, 3)),
                                      rtol=1e-5)
        numpy.testing.assert_allclose(
            link.batch_var,
            numpy.mean([x.var(axis=(0, 2, 3)) for x in window], axis=0),
            rtol=1e-5)
    link(first[0])  # a new window holds this batch alone
    numpy.testing.assert_allclose(link.batch_mean,
                                  first[0].mean(axis=(0, 2, 3)), rtol=1e-6)


def test_statistics_round_trip_through_save_npz(tmp_path):
    model = chainer.Sequential(FinalBatchNormalization(3, variance='union',
                                                       micro_batches=2))
    model(batch(4))
    model(batch(5, shift=3.))
    path = str(tmp_path / 'model.npz')
    chainer.serializers.save_npz(path, model)
    loaded = chainer.Sequential(FinalBatchNormalization(3, variance='union'))
    chainer.serializers.load_npz(path, loaded)
    for a, b in zip(model[0].kept_statistics, loaded[0].kept_statistics):
        numpy.testing.assert_array_equal(a, b)
    x = batch(6)
    with chainer.using_config('train', False):
        numpy.testing.assert_array_equal(model(x).array, loaded(x).array)


def test_training_function_is_pluggable():
    """An engine's drop-in gives the same outputs, gradients and kept
    statistics as Chainer's function."""
    x = batch(7, shape=(4, 3, 5, 5), shift=1.)
    gy = batch(8, shape=(4, 3, 5, 5))
    outputs = []
    for f in (cpu_engine.batch_normalization, F.batch_normalization):
        link = FinalBatchNormalization(3, batch_normalization=f)
        xv = chainer.Variable(x.copy())
        y = link(xv)
        assert isinstance(y.creator._impl, NumPyBatchNormalizationImpl
                          ) == (f is cpu_engine.batch_normalization)
        y.grad = gy.copy()
        y.backward()
        outputs.append((y.array, xv.grad, link.gamma.grad, link.beta.grad)
                       + link.kept_statistics)
    for a, b in zip(*outputs):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('f', [models.chainer_layers.batch_normalization,
                               cpu_engine.batch_normalization])
def test_relu_is_relu_of_the_output(f):
    """``link(x, relu=True)`` in training and test mode, with either layer
    set's function; the kept statistics are those of ``link(x)``."""
    x = batch(9, shape=(4, 3, 5, 5), shift=1.)
    plain = FinalBatchNormalization(3, batch_normalization=f)
    fused = FinalBatchNormalization(3, batch_normalization=f)
    for train in (True, False):
        with chainer.using_config('train', train):
            y = fused(x, relu=True)
            numpy.testing.assert_array_equal(y.array,
                                             F.relu(plain(x)).array)
        assert (y.array == 0).any()
    for a, b in zip(plain.kept_statistics, fused.kept_statistics):
        numpy.testing.assert_array_equal(a, b)


def test_resnet50_builds_and_runs_with_final_batch_statistics():
    model = ResNet50(n_class=3, norm=FinalBatchNormalization, width=0.25)
    zero_init_residual(model)
    links = [link for link in model.links()
             if isinstance(link, FinalBatchNormalization)]
    assert len(links) == 53
    assert sum((link.gamma.array == 0).all() for link in links) == 16
    x = numpy.random.RandomState(0).standard_normal(
        (2, 3, 32, 32)).astype(numpy.float32)
    y_train = model(x).array
    with chainer.using_config('train', False):
        numpy.testing.assert_allclose(model(x).array, y_train, rtol=1e-4,
                                      atol=1e-4)


@pytest.mark.parametrize('kwargs', [{'variance': 'median'},
                                    {'micro_batches': 0}])
def test_bad_arguments_raise_value_error(kwargs):
    with pytest.raises(ValueError, match='FinalBatchNormalization'):
        FinalBatchNormalization(3, **kwargs)
