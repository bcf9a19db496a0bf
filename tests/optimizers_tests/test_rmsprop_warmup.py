"""RMSpropWarmup against an independent NumPy statement of its equations."""
import chainer
import numpy
import pytest

from optimizers import RMSpropWarmup
from optimizers.rmsprop_warmup import rmsprop_warmup_numpy

SHAPE = (3, 4)
STEPS = 40


class OneParam(chainer.Link):

    def __init__(self, dtype=numpy.float64):
        super(OneParam, self).__init__()
        with self.init_scope():
            self.w = chainer.Parameter(
                numpy.random.RandomState(0).randn(*SHAPE).astype(dtype))


def gradients(dtype=numpy.float64, steps=STEPS):
    rng = numpy.random.RandomState(1)
    return [rng.randn(*SHAPE).astype(dtype) for _ in range(steps)]


def hyperparameters(steps=STEPS):
    """(lr, alpha_sgd, alpha_rmsprop) changing at every step."""
    rng = numpy.random.RandomState(2)
    return [(rng.uniform(0.01, 1.0), rng.uniform(0, 1), rng.uniform(0, 0.1))
            for _ in range(steps)]


def reference(theta, grads, hps, mu1=0.9, mu2=0.99, eps=1e-8):
    """The paper's update, written out step by step."""
    theta = theta.astype(numpy.float64)
    m = numpy.zeros_like(theta)
    delta = numpy.zeros_like(theta)
    for g, (lr, a_sgd, a_rms) in zip(grads, hps):
        for i in numpy.ndindex(theta.shape):
            m[i] = mu2 * m[i] + (1 - mu2) * g[i] ** 2
            delta[i] = mu1 * delta[i] - (
                a_sgd + a_rms / (numpy.sqrt(m[i]) + eps)) * g[i]
            theta[i] = theta[i] + lr * delta[i]
    return theta


def run(optimizer, link, grads, hps=None):
    for step, g in enumerate(grads):
        if hps is not None:
            (optimizer.lr, optimizer.alpha_sgd,
             optimizer.alpha_rmsprop) = hps[step]
        link.w.grad = g.copy()
        optimizer.update()
    return link.w.array


@pytest.mark.parametrize('dtype, rtol', [(numpy.float64, 1e-12),
                                         (numpy.float32, 1e-5)])
def test_matches_equations_while_hyperparameters_change(dtype, rtol):
    link = OneParam(dtype)
    theta0 = link.w.array.copy()
    optimizer = RMSpropWarmup(mu1=0.9, mu2=0.99, eps=1e-8)
    optimizer.setup(link)
    grads, hps = gradients(dtype), hyperparameters()
    result = run(optimizer, link, grads, hps)
    assert result.dtype == dtype
    numpy.testing.assert_allclose(result, reference(theta0, grads, hps),
                                  rtol=rtol, atol=rtol)


def test_other_mu_and_eps():
    link = OneParam()
    theta0 = link.w.array.copy()
    optimizer = RMSpropWarmup(mu1=0.5, mu2=0.9, eps=0.1)
    optimizer.setup(link)
    grads, hps = gradients(), hyperparameters()
    numpy.testing.assert_allclose(
        run(optimizer, link, grads, hps),
        reference(theta0, grads, hps, mu1=0.5, mu2=0.9, eps=0.1), rtol=1e-12)


def test_hyperparameters_reach_every_rule():
    link = OneParam()
    optimizer = RMSpropWarmup(lr=0.5, alpha_sgd=0.25, alpha_rmsprop=0.125)
    optimizer.setup(link)
    optimizer.lr, optimizer.alpha_sgd, optimizer.alpha_rmsprop = 2., 3., 4.
    hp = link.w.update_rule.hyperparam
    assert (hp.lr, hp.alpha_sgd, hp.alpha_rmsprop) == (2., 3., 4.)
    assert (hp.mu1, hp.mu2, hp.eps) == (0.9, 0.99, 1e-8)


def test_defaults_are_momentum_sgd():
    optimizer = RMSpropWarmup()
    assert (optimizer.alpha_sgd, optimizer.alpha_rmsprop) == (1.0, 0.0)


def test_equals_chainer_momentum_sgd_at_constant_lr():
    # Chainer: v = mu v - lr g, theta += v.  Here: theta += lr delta with
    # delta = mu delta - g, so v = lr delta as long as lr does not change.
    ours, theirs = OneParam(), OneParam()
    optimizer = RMSpropWarmup(lr=0.3, mu1=0.9, alpha_sgd=1.0,
                              alpha_rmsprop=0.0)
    optimizer.setup(ours)
    momentum_sgd = chainer.optimizers.MomentumSGD(lr=0.3, momentum=0.9)
    momentum_sgd.setup(theirs)
    grads = gradients()
    numpy.testing.assert_allclose(run(optimizer, ours, grads),
                                  run(momentum_sgd, theirs, grads),
                                  rtol=1e-12)


def test_differs_from_chainer_momentum_sgd_when_lr_changes():
    # After an lr drop Chainer's buffer still carries steps taken at the old
    # lr, while here the new lr scales the whole buffer at once.
    ours, theirs = OneParam(), OneParam()
    optimizer = RMSpropWarmup(lr=1.0)
    optimizer.setup(ours)
    momentum_sgd = chainer.optimizers.MomentumSGD(lr=1.0, momentum=0.9)
    momentum_sgd.setup(theirs)
    grads = gradients(steps=2)
    for opt, link in ((optimizer, ours), (momentum_sgd, theirs)):
        run(opt, link, grads[:1])
        opt.lr = 0.1
        run(opt, link, grads[1:])
    g0, g1 = grads
    theta0 = OneParam().w.array
    numpy.testing.assert_allclose(
        ours.w.array, theta0 - g0 - 0.1 * (0.9 * g0 + g1), rtol=1e-12)
    numpy.testing.assert_allclose(
        theirs.w.array, theta0 - g0 - (0.9 * g0 + 0.1 * g1), rtol=1e-12)


def test_resume_mid_warmup_is_exact(tmp_path):
    grads, hps = gradients(numpy.float32), hyperparameters()
    half = STEPS // 2

    link = OneParam(numpy.float32)
    optimizer = RMSpropWarmup()
    optimizer.setup(link)
    uninterrupted = run(optimizer, link, grads, hps).copy()

    link = OneParam(numpy.float32)
    optimizer = RMSpropWarmup()
    optimizer.setup(link)
    run(optimizer, link, grads[:half], hps[:half])
    chainer.serializers.save_npz(str(tmp_path / 'link.npz'), link)
    chainer.serializers.save_npz(str(tmp_path / 'opt.npz'), optimizer)

    fresh_link = OneParam(numpy.float32)
    fresh = RMSpropWarmup()
    fresh.setup(fresh_link)
    chainer.serializers.load_npz(str(tmp_path / 'link.npz'), fresh_link)
    chainer.serializers.load_npz(str(tmp_path / 'opt.npz'), fresh)
    assert fresh.t == half
    assert set(fresh_link.w.update_rule.state) == {'m', 'delta'}
    resumed = run(fresh, fresh_link, grads[half:], hps[half:])
    numpy.testing.assert_array_equal(resumed, uninterrupted)


def test_eps_too_small_for_float16():
    link = OneParam(numpy.float16)
    optimizer = RMSpropWarmup(eps=1e-10)
    optimizer.setup(link)
    link.w.grad = numpy.ones(SHAPE, numpy.float16)
    with pytest.raises(ValueError, match='eps'):
        optimizer.update()


def test_cpu_kernel_does_the_update_on_numpy_arrays():
    calls = []

    def kernel(*args):
        calls.append(args[4:])
        rmsprop_warmup_numpy(*args)
    link = OneParam(numpy.float32)
    optimizer = RMSpropWarmup(lr=0.5, alpha_sgd=0.7, alpha_rmsprop=0.01,
                              cpu_kernel=kernel)
    optimizer.setup(link)
    grads = gradients(numpy.float32, steps=2)
    run(optimizer, link, grads)
    assert calls == [(0.5, 0.9, 0.99, numpy.float32(1e-8), 0.7, 0.01)] * 2
    reference_link = OneParam(numpy.float32)
    reference_optimizer = RMSpropWarmup(lr=0.5, alpha_sgd=0.7,
                                        alpha_rmsprop=0.01)
    reference_optimizer.setup(reference_link)
    numpy.testing.assert_array_equal(
        link.w.array, run(reference_optimizer, reference_link, grads))
