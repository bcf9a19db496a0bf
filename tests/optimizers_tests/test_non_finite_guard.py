"""NonFiniteGradientGuard: a non-finite gradient stops the update before any
rule applies it, naming the first parameter that holds one."""
import chainer
import numpy
import pytest

from largebatch import errors
from optimizers import NonFiniteGradientGuard


class Net(chainer.Link):

    def __init__(self, dtype=numpy.float32):
        super(Net, self).__init__()
        with self.init_scope():
            for name in ('a', 'b', 'c'):
                setattr(self, name, chainer.Parameter(
                    numpy.ones((2, 3), dtype)))


def guarded(net):
    optimizer = chainer.optimizers.SGD(lr=1.0)
    optimizer.setup(net)
    optimizer.add_hook(NonFiniteGradientGuard())
    return optimizer


def set_grads(net, bad=None, value=numpy.nan):
    for name, p in net.namedparams():
        p.grad = numpy.full(p.shape, 0.5, p.dtype)
        if name in (bad or {}):
            p.grad.flat[:bad[name]] = value


def test_finite_gradients_are_applied():
    net = Net()
    set_grads(net)
    guarded(net).update()
    for p in net.params():
        numpy.testing.assert_array_equal(p.array, 0.5)


@pytest.mark.parametrize('value', [numpy.nan, numpy.inf, -numpy.inf])
@pytest.mark.parametrize('dtype', [numpy.float32, numpy.float16])
def test_a_non_finite_gradient_stops_the_update(value, dtype):
    net = Net(dtype)
    set_grads(net, {'/b': 2, '/c': 1}, value)
    with pytest.raises(errors.NonFiniteGradientError) as e:
        guarded(net).update()
    assert (e.value.count, e.value.param_name) == (3, '/b')
    for p in net.params():
        numpy.testing.assert_array_equal(p.array, 1.0)  # nothing applied


def test_the_largest_float16_values_are_finite():
    net = Net(numpy.float16)
    set_grads(net)
    net.a.grad[0] = [65504, -65504, 0]
    net.b.grad[...] = -0.0
    optimizer = guarded(net)
    optimizer.lr = 0.0
    optimizer.update()
    assert optimizer.t == 1  # the update ran


def test_parameters_without_gradients_are_skipped():
    net = Net()
    set_grads(net, {'/a': 1})
    net.a.grad = None
    guarded(net).update()
    numpy.testing.assert_array_equal(net.a.array, 1.0)
    for p in (net.b, net.c):
        numpy.testing.assert_array_equal(p.array, 0.5)
    net.cleargrads()
    optimizer = guarded(net)
    optimizer.update()  # no gradient at all: nothing to check
    assert optimizer.t == 1
    numpy.testing.assert_array_equal(net.b.array, 0.5)


def test_a_mean_the_communicator_checked_is_not_scanned_again():
    # NaN left in the gradient stands for a scan the guard must not do: the
    # communicator checked (and would have raised on) the mean.
    link = chainer.Link()
    with link.init_scope():
        link.w = chainer.Parameter(numpy.ones(3, numpy.float32))
    link.w.grad = numpy.array([1, numpy.nan, 2], numpy.float32)
    guard = NonFiniteGradientGuard(mean_checked=True)
    optimizer = chainer.optimizers.SGD(lr=0.0)
    optimizer.setup(link)
    optimizer.add_hook(guard)
    optimizer.update()
    optimizer = chainer.optimizers.SGD(lr=0.0)
    optimizer.setup(link)
    optimizer.add_hook(NonFiniteGradientGuard(mean_checked=False))
    with pytest.raises(errors.NonFiniteGradientError):
        optimizer.update()
