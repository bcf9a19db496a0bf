"""mixed16 with K micro-batches: the update of K = 48 micro-batches of one
image is that of one batch of 48, within one float16 rounding, on CPU with
Chainer's float16 arithmetic, with and without a loss scale."""
import chainer
import chainer.links as L
import numpy
import pytest

import models
import updaters
from optimizers.loss_scaling import DynamicLossScale

EXAMPLES = 48


def examples():
    """Inputs of one class: per-image gradients of one sign, float16
    normals (1e-4 to 2e-3) whose 1/48 shares are float16 subnormals."""
    rng = numpy.random.RandomState(0)
    return [(rng.uniform(1e-3, 2e-3, 8).astype(numpy.float32),
             numpy.int32(0)) for _ in range(EXAMPLES)]


def master_step(micro_batches, scale):
    """The float32 master weights' change after one SGD update (lr 1)."""
    with chainer.using_config('dtype', chainer.mixed16):
        numpy.random.seed(1)
        fc = L.Linear(8, 4, nobias=True)
    model = L.Classifier(models.MixedPrecision(fc))
    optimizer = chainer.optimizers.SGD(lr=1.0)
    optimizer.setup(model)
    optimizer.use_fp32_update()
    before = fc.W.array.astype(numpy.float64)
    iterator = chainer.iterators.SerialIterator(
        examples(), EXAMPLES // micro_batches, shuffle=False)
    updater = updaters.MicroBatchUpdater(
        iterator, optimizer, chainer.dataset.concat_examples, -1,
        micro_batches, loss_scale=DynamicLossScale(scale, min_scale=1.0))
    reporter = chainer.reporter.Reporter()
    reporter.add_observer('main', model)
    with reporter.scope({}):
        updater.update()
    return fc.W.update_rule._fp32_param.array - before, before


def exact_step(w):
    """The SGD step of the mean gradient in float64, from the float16
    logits the network computes: what differs from it is the backward
    pass's rounding."""
    x = numpy.array([e[0] for e in examples()]).astype(numpy.float16)
    t = numpy.array([e[1] for e in examples()])
    y = x.dot(w.astype(numpy.float16).T).astype(numpy.float64)
    p = numpy.exp(y - y.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[numpy.arange(len(t)), t] -= 1
    return -(p.T @ x.astype(numpy.float64)) / len(t)


@pytest.mark.parametrize('scale', [1.0, 2.0 ** 10])
def test_48_micro_batches_update_as_one_batch_of_48(scale):
    one, w = master_step(1, scale)
    many, _ = master_step(EXAMPLES, scale)
    exact = exact_step(w)
    # one float16 rounding of the largest element (2^-11 relative); float16
    # shares of 1/48 summed in float16 are 3 to 5 of them off
    tolerance = 2.0 ** -11 * numpy.abs(exact).max()
    numpy.testing.assert_allclose(one, exact, rtol=0, atol=tolerance)
    numpy.testing.assert_allclose(many, exact, rtol=0, atol=tolerance)
