"""A gradient penalty through the engine's layers equals Chainer's.

The penalty ``||d loss / d x||^2`` is backpropagated to the weights: the
gradients of the engine's gradients, through every layer of ResNet-50.
"""
import chainer
import chainer.functions as F
import numpy
import pytest

import cpu_engine
from cpu_engine.convolution_2d import Convolution2DFunction
from models import chainer_layers


class SmallResNet(chainer.Chain):
    """ResNet-50's stem and one residual block of ``layers``' layers."""

    def __init__(self, layers, initialW):
        super(SmallResNet, self).__init__()
        self.layers = layers
        with self.init_scope():
            self.conv1 = layers.Convolution2D(3, 8, 3, 2, 1, nobias=True,
                                              initialW=initialW)
            self.bn1 = layers.BatchNormalization(8)
            self.conv2 = layers.Convolution2D(8, 8, 3, 1, 1,
                                              initialW=initialW)
            self.conv3 = layers.Convolution2D(8, 8, 1, initialW=initialW)

    def forward(self, x):
        h = self.layers.relu(self.bn1(self.conv1(x)))
        h = self.layers.max_pooling_2d(h, 3, 2, 1)
        return self.layers.add_relu(
            self.conv3(self.layers.relu(self.conv2(h))), h)


def penalty_and_grads(model, x, target):
    """``||d loss / d x||^2`` and its gradients for ``model``'s params."""
    x = chainer.Variable(x)
    loss = F.mean_squared_error(model(x), target)
    gx, = chainer.grad([loss], [x], enable_double_backprop=True)
    penalty = F.sum(gx * gx)
    model.cleargrads()
    penalty.backward()
    return [penalty.array] + [p.grad for _, p in sorted(model.namedparams())]


@pytest.mark.parametrize('dtype, tol', [
    (numpy.float32, dict(atol=1e-6, rtol=1e-4)),
    (numpy.float64, dict(atol=1e-12, rtol=1e-10))])
def test_gradient_penalty_matches_chainer(dtype, tol):
    rng = numpy.random.RandomState(19)
    x = rng.standard_normal((4, 3, 16, 16)).astype(dtype)
    target = rng.standard_normal((4, 8, 5, 5)).astype(dtype)
    with chainer.using_config('dtype', dtype):
        theirs = SmallResNet(chainer_layers,
                             chainer.initializers.HeNormal(rng=rng))
        ours = SmallResNet(cpu_engine, None)
    ours.copyparams(theirs)
    assert isinstance(ours.conv1(x).creator, Convolution2DFunction)
    expected = penalty_and_grads(theirs, x, target)
    actual = penalty_and_grads(ours, x, target)
    assert all(g is not None and g.any() for g in actual)
    for e, a in zip(expected, actual):
        numpy.testing.assert_allclose(a, e, **tol)
