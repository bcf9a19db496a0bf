"""CorrectedMomentumSGD: Chainer's update, one buffer, the CPU kernel plug,
and the same steps as RMSprop warm-up held at alpha_sgd = 1."""
import chainer
import numpy
import pytest

from optimizers import CorrectedMomentumSGD
from optimizers import RMSpropWarmup

SHAPE = (3, 4)


class OneParam(chainer.Link):

    def __init__(self, dtype):
        super(OneParam, self).__init__()
        with self.init_scope():
            self.w = chainer.Parameter(
                numpy.random.RandomState(0).randn(*SHAPE).astype(dtype))


def train(optimizer, dtype=numpy.float32, steps=12, link=None, start=0):
    """Updates with a learning rate that changes at every step (a warm-up,
    then drops, as the goyal schedule); returns the link."""
    link = link or OneParam(dtype)
    if optimizer.target is None:
        optimizer.setup(link)
    rng = numpy.random.RandomState(1)
    grads = [rng.randn(*SHAPE).astype(dtype) for _ in range(steps)]
    for step in range(start, steps):
        optimizer.lr = (0.1 * (step + 1) if step < 6
                        else 0.01 * 0.1 ** (step // 9))
        link.w.grad = grads[step].copy()
        optimizer.update()
    return link


@pytest.mark.parametrize('dtype', [numpy.float32, numpy.float64])
def test_same_steps_as_rmsprop_warmup_at_alpha_sgd_one(dtype):
    """delta = mu1 delta - g, theta += lr delta: the momentum SGD the
    RMSprop warm-up slides into, to the bit."""
    ours = train(CorrectedMomentumSGD(momentum=0.9), dtype)
    warmup = train(RMSpropWarmup(mu1=0.9, alpha_sgd=1.0, alpha_rmsprop=0.0),
                   dtype)
    numpy.testing.assert_array_equal(ours.w.array, warmup.w.array)
    numpy.testing.assert_array_equal(ours.w.update_rule.state['v'],
                                     warmup.w.update_rule.state['delta'])


def test_one_buffer_per_parameter():
    link = train(CorrectedMomentumSGD(), steps=1)
    assert set(link.w.update_rule.state) == {'v'}


def test_lr_change_acts_on_the_whole_buffer_at_once():
    """Goyal et al.'s momentum correction: after the first step, a change
    of lr scales the step taken from the whole buffer."""
    link = OneParam(numpy.float64)
    theta0 = link.w.array.copy()
    optimizer = CorrectedMomentumSGD(lr=1.0, momentum=0.9)
    optimizer.setup(link)
    g0, g1 = numpy.ones(SHAPE), 2 * numpy.ones(SHAPE)
    link.w.grad = g0.copy()
    optimizer.update()
    optimizer.lr = 0.1
    link.w.grad = g1.copy()
    optimizer.update()
    numpy.testing.assert_allclose(
        link.w.array, theta0 - g0 - 0.1 * (0.9 * g0 + g1), rtol=1e-12)


def test_cpu_kernel_does_the_update_on_numpy_arrays():
    calls = []

    def kernel(theta, g, v, lr, momentum):
        calls.append((lr, momentum))
        v *= momentum
        v -= g
        theta += lr * v
    ours = train(CorrectedMomentumSGD(momentum=0.8, cpu_kernel=kernel),
                 steps=3)
    assert calls == [(0.1, 0.8), (0.2, 0.8), (pytest.approx(0.3), 0.8)]
    chainers = train(chainer.optimizers.CorrectedMomentumSGD(momentum=0.8),
                     steps=3)
    numpy.testing.assert_array_equal(ours.w.array, chainers.w.array)


def test_resume_is_exact(tmp_path):
    uninterrupted = train(CorrectedMomentumSGD()).w.array
    optimizer = CorrectedMomentumSGD()
    link = train(optimizer, steps=5)
    chainer.serializers.save_npz(str(tmp_path / 'link.npz'), link)
    chainer.serializers.save_npz(str(tmp_path / 'opt.npz'), optimizer)
    fresh_link, fresh = OneParam(numpy.float32), CorrectedMomentumSGD()
    fresh.setup(fresh_link)
    chainer.serializers.load_npz(str(tmp_path / 'link.npz'), fresh_link)
    chainer.serializers.load_npz(str(tmp_path / 'opt.npz'), fresh)
    assert fresh.t == 5
    resumed = train(fresh, link=fresh_link, start=5).w.array
    numpy.testing.assert_array_equal(resumed, uninterrupted)
