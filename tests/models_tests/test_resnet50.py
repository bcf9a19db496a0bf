"""models.resnet50: the network, its width, its layer sets, zero init."""
import chainer
import chainer.functions as F
import chainer.links as L
import numpy
import pytest

import cpu_engine
import models
from models import ResNet50


def test_parameter_count_matches_resnet50():
    model = ResNet50()
    assert sum(p.size for p in model.params()) == 25557032


def test_no_convolution_has_a_bias():
    model = ResNet50(n_class=10)
    convs = [link for link in model.links()
             if isinstance(link, L.Convolution2D)]
    assert len(convs) == 53
    assert all(c.b is None for c in convs)


@pytest.mark.parametrize('side', [224, 32, 45])
def test_output_shape(side):
    model = ResNet50(n_class=7)
    x = numpy.zeros((2, 3, side, side), numpy.float32)
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        assert model(x).shape == (2, 7)


def test_rejects_inputs_smaller_than_32():
    with pytest.raises(ValueError, match='at least 32x32'):
        ResNet50(n_class=2)(numpy.zeros((1, 3, 31, 31), numpy.float32))


def test_deterministic_under_a_seed():
    def init(seed):
        numpy.random.seed(seed)
        return [p.array.copy() for p in ResNet50(n_class=5).params()]
    a, b, c = init(3), init(3), init(4)
    assert all((x == y).all() for x, y in zip(a, b))
    assert not all((x == y).all() for x, y in zip(a, c))


# --- width -----------------------------------------------------------------

def test_width_one_is_the_papers_resnet50():
    assert sum(p.size for p in ResNet50(width=1.0).params()) == 25557032


def test_width_scales_every_channel_count():
    full, eighth = ResNet50(n_class=10), ResNet50(n_class=10, width=0.125)
    assert eighth.conv1.W.shape[0] == 8
    assert eighth.fc.W.shape == (10, 256)
    for (name, a), (_, b) in zip(sorted(full.namedparams()),
                                 sorted(eighth.namedparams())):
        if a.ndim == 4:  # convolution kernels: out and in channels scale
            assert b.shape[0] * 8 == a.shape[0], name
            assert b.shape[1] * 8 == a.shape[1] or b.shape[1] == 3, name


def test_narrow_model_runs_on_32_pixels():
    model = ResNet50(n_class=10, width=0.125)
    x = numpy.zeros((2, 3, 32, 32), numpy.float32)
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        assert model(x).shape == (2, 10)


def test_rejects_a_non_positive_width():
    with pytest.raises(ValueError, match='width must be positive'):
        ResNet50(width=0)


# --- layer sets ------------------------------------------------------------

def test_default_layers_are_chainers():
    model = ResNet50(n_class=3, width=0.125)
    kinds = {type(link) for link in model.links()}
    assert kinds == {ResNet50, models.resnet50.Block,
                     models.resnet50.BottleNeck, L.Convolution2D,
                     models.chainer_layers.BatchNormalization, L.Linear}


def persistent_names(model):
    return sorted(path + '/' + name for path, link in model.namedlinks()
                  for name in link._persistent)


@pytest.mark.parametrize('dtype, zero_init, tol, channels_last', [
    # float64: the NumPy paths. float32: the C loops and oneDNN as well, in
    # both activation layouts; a fresh network amplifies float32 rounding by
    # orders of magnitude unless its blocks start as their shortcuts.
    (numpy.float64, False, 1e-9, 'auto'), (numpy.float32, True, 1e-3, True),
    (numpy.float32, True, 1e-3, False)])
def test_cpu_engine_layers_compute_what_chainers_do(dtype, zero_init, tol,
                                                    channels_last):
    with chainer.using_config('cpu_channels_last', channels_last):
        _compare_cpu_engine_with_chainer(dtype, zero_init, tol)


def _compare_cpu_engine_with_chainer(dtype, zero_init, tol):
    numpy.random.seed(0)
    with chainer.using_config('dtype', dtype):
        chainers = ResNet50(n_class=10, width=0.25)
        engines = ResNet50(n_class=10, width=0.25, layers=cpu_engine)
    if zero_init:
        models.zero_init_residual(chainers)
    assert isinstance(engines.conv1, cpu_engine.Convolution2D)
    assert isinstance(engines.res3[0].bn2, cpu_engine.BatchNormalization)
    assert ([name for name, _ in engines.namedparams()]
            == [name for name, _ in chainers.namedparams()])
    assert persistent_names(engines) == persistent_names(chainers)
    engines.copyparams(chainers)
    rng = numpy.random.RandomState(15)
    x = rng.standard_normal((2, 3, 40, 40)).astype(dtype)
    t = numpy.array([1, 7], numpy.int32)
    results = []
    for model in (chainers, engines):
        loss = F.softmax_cross_entropy(model(x), t)
        model.cleargrads()
        loss.backward()
        results.append([loss.array] + [
            p.grad for _, p in sorted(model.namedparams())] + [
            link.avg_mean for _, link in sorted(model.namedlinks())
            if isinstance(link, L.BatchNormalization)])
    theirs, ours = results
    assert len(ours) == len(theirs) > 160
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype == dtype
        numpy.testing.assert_allclose(a, b, rtol=tol,
                                      atol=tol * numpy.abs(b).max())


# --- zero_init_residual ------------------------------------------------------

def test_zero_init_residual_zeroes_last_gamma_of_each_block():
    model = ResNet50(n_class=3, width=0.125)
    models.zero_init_residual(model)
    blocks = [b for res in (model.res2, model.res3, model.res4, model.res5)
              for b in res]
    assert len(blocks) == 16
    assert all((b.bn3.gamma.array == 0).all() for b in blocks)
    others = [link for _, link in model.namedlinks()
              if isinstance(link, L.BatchNormalization)
              and not any(link is b.bn3 for b in blocks)]
    assert len(others) == 53 - 16
    assert all((link.gamma.array == 1).all() for link in others)


def test_zero_init_residual_blocks_start_as_their_shortcut():
    model = ResNet50(n_class=3, width=0.125)
    models.zero_init_residual(model)
    block = model.res2[1]  # an identity shortcut
    assert not block.projection
    x = numpy.random.RandomState(0).rand(2, 32, 8, 8).astype(numpy.float32)
    numpy.testing.assert_array_equal(block(x).array, x)
