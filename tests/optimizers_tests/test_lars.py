"""LARS against You, Gitman & Ginsburg's formula written out in NumPy."""
import chainer
import chainer.links as L
import numpy
import pytest

from optimizers import LARS
from optimizers import recipes


class Net(chainer.Chain):

    def __init__(self):
        super(Net, self).__init__()
        with self.init_scope():
            self.conv = L.Convolution2D(2, 3, 3)
            self.bn = L.BatchNormalization(3)
            self.fc = L.Linear(12, 4)


def reference_step(w, g, v, lr, momentum, eta, beta, exempt):
    """One step of the paper's update for one array, in float64."""
    if exempt:
        v[...] = momentum * v + lr * g
    else:
        local = eta * numpy.linalg.norm(w) / (
            numpy.linalg.norm(g) + beta * numpy.linalg.norm(w) + 1e-9)
        v[...] = momentum * v + lr * local * (g + beta * w)
    w -= v


def test_lars_matches_the_formula_with_changing_lr():
    recipe = recipes.resolve('you2017', 90, momentum=0.8, weight_decay=0.01,
                             lars_eta=0.02)
    net = Net()
    rng = numpy.random.RandomState(0)
    for p in net.params():
        p.array[...] = rng.uniform(-1, 1, p.shape)
    optimizer = recipes.create_optimizer(recipe)
    optimizer.setup(net)
    recipes.add_hooks(optimizer, recipe)
    expected = {name: p.array.astype(numpy.float64)
                for name, p in net.namedparams()}
    velocity = {name: numpy.zeros_like(w) for name, w in expected.items()}
    exempt = {'/bn/gamma', '/bn/beta', '/conv/b', '/fc/b'}
    for step, lr in enumerate([0.5, 2.0, 1.0, 3.0]):
        optimizer.lr = lr
        grads = {}
        for name, p in net.namedparams():
            p.grad = rng.normal(0, 10 ** rng.uniform(-3, 0), p.shape).astype(
                numpy.float32)
            grads[name] = p.grad.astype(numpy.float64)
        optimizer.update()
        for name, p in net.namedparams():
            reference_step(expected[name], grads[name], velocity[name], lr,
                           0.8, 0.02, 0.01, name in exempt)
            numpy.testing.assert_allclose(p.array, expected[name], rtol=1e-5,
                                          atol=1e-6,
                                          err_msg='{} at step {}'.format(
                                              name, step))


def test_small_norm_arrays_take_plain_steps():
    hook = LARS(trust_coefficient=0.001, weight_decay=0.0)
    param = chainer.Parameter(numpy.zeros(5, numpy.float32))
    param.grad = numpy.full(5, 2.0, numpy.float32)
    hook(None, param)
    numpy.testing.assert_array_equal(param.grad, numpy.full(5, 2.0))


class Mixed16Net(chainer.Chain):
    """A float16 weight and a float32 normalization scale, as
    ``chainer.mixed16`` makes them."""

    def __init__(self, w):
        super(Mixed16Net, self).__init__()
        with self.init_scope():
            self.W = chainer.Parameter(w.astype(numpy.float16))
            self.gamma = chainer.Parameter(numpy.ones(3, numpy.float32))


@pytest.mark.parametrize('flags', [{}, {'lars': False}])
def test_hooks_act_on_the_float32_master_with_the_loss_scale_out(flags):
    """Under mixed16 with a loss scale the hook sees the float32 master
    and the unscaled gradient: the update equals the float32 run's within
    the float16 rounding of the gradient, and a decay that would overflow
    float16 (rate x scale x w > 65504) stays finite."""
    w = numpy.random.RandomState(1).uniform(50, 60, 40).astype(
        numpy.float16).astype(numpy.float32)
    g = numpy.random.RandomState(2).randn(40).astype(numpy.float32)
    results = []
    for dtype, scale in ((numpy.float32, None), (numpy.float16, 1024.0)):
        recipe = recipes.resolve('you2017', 90, weight_decay=2.0, **flags)
        net = Mixed16Net(w)
        if dtype == numpy.float32:
            net.W.array = w.copy()
        optimizer = recipes.create_optimizer(recipe)
        optimizer.setup(net)
        if dtype == numpy.float16:
            optimizer.use_fp32_update()
        recipes.add_hooks(optimizer, recipe)
        optimizer.lr = 0.01
        net.W.grad = (g * (scale or 1)).astype(dtype)
        net.gamma.grad = numpy.full(3, scale or 1, numpy.float32)
        for param in net.params():
            param._loss_scale = scale
        optimizer.update()
        rule = net.W.update_rule
        results.append(rule._fp32_param.array if dtype == numpy.float16
                       else net.W.array)
    assert numpy.isfinite(results[1]).all()
    numpy.testing.assert_allclose(results[1], results[0], rtol=1e-4)


@pytest.mark.parametrize('flags, hooks', [
    ({}, ['LARS']),
    ({'lars': False}, ['WeightDecay']),
    ({'lars': False, 'weight_decay': 0}, []),
])
def test_lars_replaces_the_weight_decay_hook(flags, hooks):
    recipe = recipes.resolve('you2017', 90, **flags)
    optimizer = recipes.create_optimizer(recipe)
    net = Net()
    optimizer.setup(net)
    recipes.add_hooks(optimizer, recipe)
    assert list(optimizer._hookable._pre_update_hooks) == []
    for param in net.params():
        assert list(param.update_rule._hookable._pre_update_hooks) == hooks


class HostReadCounter(object):
    """An ``xp`` that is NumPy but counts reads of 0-d results to the host."""

    def __init__(self):
        self.reads = 0
        self.float64, self.float32 = numpy.float64, numpy.float32
        counter = self

        class Scalar(numpy.ndarray):
            def __float__(self):
                counter.reads += 1
                return float(numpy.asarray(self))

            def item(self, *args):
                counter.reads += 1
                return numpy.asarray(self).item(*args)

        self.linalg = type('linalg', (), {'norm': staticmethod(
            lambda a: numpy.asarray(numpy.linalg.norm(a)).view(Scalar))})

    def where(self, *args):
        return numpy.where(*args)


def test_trust_ratio_stays_an_array_on_the_device():
    # On a GPU every float() of a norm waits for the device; the ratio is
    # computed from 0-d arrays, and equals the formula.
    xp = HostReadCounter()
    rng = numpy.random.RandomState(3)
    w = rng.randn(5, 4).astype(numpy.float32)
    g = rng.randn(5, 4).astype(numpy.float32)
    hook = LARS(trust_coefficient=0.001, weight_decay=1e-4)
    rate = hook.trust_ratio(xp, w, g)
    assert xp.reads == 0
    assert isinstance(rate, numpy.ndarray) and rate.shape == ()
    norm_w = numpy.linalg.norm(w.astype(numpy.float64))
    norm_g = numpy.linalg.norm(g.astype(numpy.float64))
    assert float(rate) == pytest.approx(
        0.001 * norm_w / (norm_g + 1e-4 * norm_w + 1e-9), rel=1e-6)
    assert float(hook.trust_ratio(xp, w * 1e-4, g)) == 1.0  # threshold
