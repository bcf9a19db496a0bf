"""The label-smoothed loss and its gradient against the formula."""
import chainer
import numpy
import pytest

from models import label_smoothed_cross_entropy


def log_softmax(y):
    z = y - y.max(axis=1, keepdims=True)
    return z - numpy.log(numpy.exp(z).sum(axis=1, keepdims=True))


@pytest.mark.parametrize('eps', [0.0, 0.1, 0.5])
def test_loss_and_gradient_match_the_smoothed_targets(eps):
    rng = numpy.random.RandomState(0)
    n, k = 6, 5
    y = rng.randn(n, k) * 3
    t = rng.randint(0, k, n).astype(numpy.int32)
    target = (1 - eps) * numpy.eye(k)[t] + eps / k
    expected = -(target * log_softmax(y)).sum(axis=1).mean()
    # d/dy of the mean over the batch: (softmax(y) - target) / n
    expected_grad = (numpy.exp(log_softmax(y)) - target) / n

    x = chainer.Variable(y.copy())
    loss = label_smoothed_cross_entropy(x, t, eps)
    loss.backward()
    assert float(loss.array) == pytest.approx(expected, rel=1e-10)
    numpy.testing.assert_allclose(x.grad, expected_grad, rtol=1e-9,
                                  atol=1e-12)


def test_eps_zero_is_softmax_cross_entropy():
    y = numpy.random.RandomState(1).randn(4, 3).astype(numpy.float32)
    t = numpy.array([0, 2, 1, 1], numpy.int32)
    ours = label_smoothed_cross_entropy(y, t, 0.0)
    theirs = chainer.functions.softmax_cross_entropy(y, t)
    assert float(ours.array) == float(theirs.array)
