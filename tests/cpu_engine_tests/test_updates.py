"""cpu_engine.updates: the C loops, the NumPy path, the equations and the
optimizers' own updates agree."""
import chainer
import numpy
import pytest

from cpu_engine import cpu_runtime
from cpu_engine import updates
from cpu_engine_helper import KERNELS
from cpu_engine_helper import use_kernels
from optimizers import CorrectedMomentumSGD
from optimizers import RMSpropWarmup

SHAPE = (317, 1009)  # many L2 blocks on every thread
HYPERPARAMETERS = dict(mu1=0.9, mu2=0.99, eps=1e-8)


def arrays(dtype=numpy.float32, order='C', seed=0):
    """theta, g, m >= 0 and delta, as a mid-training state."""
    rng = numpy.random.RandomState(seed)
    theta, g, delta = rng.standard_normal((3,) + SHAPE)
    m = rng.rand(*SHAPE)
    return [numpy.asarray(a, dtype, order=order)
            for a in (theta, g, m, delta)]


def reference(theta, g, m, delta, lr, mu1, mu2, eps, alpha_sgd,
              alpha_rmsprop):
    """The update of optimizers.rmsprop_warmup, in float64."""
    theta, g, m, delta = (a.astype(numpy.float64)
                          for a in (theta, g, m, delta))
    m = mu2 * m + (1 - mu2) * g * g
    delta = mu1 * delta - (alpha_sgd + alpha_rmsprop / (
        numpy.sqrt(m) + eps)) * g
    return theta + lr * delta, m, delta


def rmsprop_warmup(state, lr, alpha_sgd, alpha_rmsprop):
    """Three steps of updates.rmsprop_warmup in place; the float64 reference
    of the same steps."""
    expected = [a.astype(numpy.float64) for a in state]
    for step in range(3):
        lr_t = lr / (step + 1)
        updates.rmsprop_warmup(*state, lr=lr_t, alpha_sgd=alpha_sgd,
                               alpha_rmsprop=alpha_rmsprop,
                               **HYPERPARAMETERS)
        expected[0], expected[2], expected[3] = reference(
            *expected, lr=lr_t, alpha_sgd=alpha_sgd,
            alpha_rmsprop=alpha_rmsprop, **HYPERPARAMETERS)
    return expected


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('alpha_rmsprop', [0.0, 0.05])
@pytest.mark.parametrize('dtype, order', [(numpy.float32, 'C'),
                                          (numpy.float32, 'F'),
                                          (numpy.float64, 'C')])
def test_rmsprop_warmup_matches_the_equations(kernels, alpha_rmsprop, dtype,
                                              order, monkeypatch):
    use_kernels(kernels, monkeypatch)
    state = arrays(dtype, order)
    g = state[1].copy()
    expected = rmsprop_warmup(state, 0.5, 0.7, alpha_rmsprop)
    tol = 1e-12 if dtype == numpy.float64 else 1e-5
    for actual, wanted in zip(state, expected):
        assert actual.dtype == dtype
        numpy.testing.assert_allclose(actual, wanted, rtol=tol, atol=tol)
    numpy.testing.assert_array_equal(state[1], g)  # the gradient is read only


needs_kernels = pytest.mark.skipif(cpu_runtime.kernels is None,
                                   reason='cpu_engine._kernels is not built')


@needs_kernels
@pytest.mark.parametrize('alpha_rmsprop', [0.0, 0.05])
def test_rmsprop_warmup_c_loop_rounds_as_numpy(alpha_rmsprop, monkeypatch):
    """The C loop does NumPy's float32 operations in NumPy's order, with no
    FMA contraction: the two paths agree to the bit."""
    results = []
    for kernels in ('native', 'numpy'):
        use_kernels(kernels, monkeypatch)
        state = arrays()
        rmsprop_warmup(state, 0.5, 0.7, alpha_rmsprop)
        results.append(state)
    for native, fallback in zip(*results):
        numpy.testing.assert_array_equal(native, fallback)


@needs_kernels
def test_weight_decay_c_loop_rounds_as_numpy(monkeypatch):
    results = []
    for kernels in ('native', 'numpy'):
        use_kernels(kernels, monkeypatch)
        theta, g = arrays()[:2]
        updates.weight_decay(g, theta, 1e-4)
        results.append(g)
    numpy.testing.assert_array_equal(*results)


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('dtype, order', [(numpy.float32, 'C'),
                                          (numpy.float32, 'F'),
                                          (numpy.float64, 'C')])
def test_weight_decay_adds_rate_times_theta(kernels, dtype, order,
                                            monkeypatch):
    use_kernels(kernels, monkeypatch)
    theta, g = arrays(dtype, order)[:2]
    expected = g.astype(numpy.float64) + 1e-4 * theta.astype(numpy.float64)
    theta0 = theta.copy()
    updates.weight_decay(g, theta, 1e-4)
    assert g.dtype == dtype
    numpy.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-7)
    numpy.testing.assert_array_equal(theta, theta0)


def corrected_momentum_sgd(state, lr, momentum=0.9):
    """Three steps of updates.corrected_momentum_sgd on (theta, g, v) in
    place; the float64 equations of the same steps."""
    expected = [a.astype(numpy.float64) for a in state]
    for step in range(3):
        lr_t = lr / (step + 1)
        updates.corrected_momentum_sgd(*state, lr=lr_t, momentum=momentum)
        expected[2] = momentum * expected[2] - expected[1]
        expected[0] = expected[0] + lr_t * expected[2]
    return expected


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('dtype, order', [(numpy.float32, 'C'),
                                          (numpy.float32, 'F'),
                                          (numpy.float64, 'C')])
def test_corrected_momentum_sgd_matches_the_equations(kernels, dtype, order,
                                                      monkeypatch):
    use_kernels(kernels, monkeypatch)
    theta, g, _, v = arrays(dtype, order)
    state = [theta, g, v]
    expected = corrected_momentum_sgd(state, 0.5)
    tol = 1e-12 if dtype == numpy.float64 else 1e-5
    for actual, wanted in zip(state, expected):
        assert actual.dtype == dtype
        numpy.testing.assert_allclose(actual, wanted, rtol=tol, atol=tol)


@needs_kernels
def test_corrected_momentum_sgd_c_loop_rounds_as_numpy(monkeypatch):
    results = []
    for kernels in ('native', 'numpy'):
        use_kernels(kernels, monkeypatch)
        theta, g, _, v = arrays()
        corrected_momentum_sgd([theta, g, v], 0.5)
        results.append([theta, v])
    for native, fallback in zip(*results):
        numpy.testing.assert_array_equal(native, fallback)


def train(optimizer, steps=4):
    """The parameter and the optimizer's state after ``steps`` updates of a
    large float32 parameter, the learning rate changing at every step."""
    rng = numpy.random.RandomState(5)
    link = chainer.Link()
    with link.init_scope():
        link.w = chainer.Parameter(rng.randn(*SHAPE).astype(numpy.float32))
    optimizer.setup(link)
    for step in range(steps):
        optimizer.lr = 0.5 / (step + 1)
        link.w.grad = rng.randn(*SHAPE).astype(numpy.float32)
        optimizer.update()
    return [link.w.array] + [link.w.update_rule.state[k]
                             for k in sorted(link.w.update_rule.state)]


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('alpha_rmsprop', [0.0, 0.05])
def test_rmsprop_warmup_with_the_engine_gives_its_numpy_bits(
        kernels, alpha_rmsprop, monkeypatch):
    """A CPU run and a run without the engine take the same steps."""
    use_kernels(kernels, monkeypatch)
    engine, numpy_only = [train(RMSpropWarmup(
        alpha_sgd=0.7, alpha_rmsprop=alpha_rmsprop, cpu_kernel=kernel))
        for kernel in (updates.rmsprop_warmup, None)]
    for a, b in zip(engine, numpy_only):
        numpy.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('kernels', KERNELS)
def test_corrected_momentum_sgd_with_the_engine_gives_chainers_bits(
        kernels, monkeypatch):
    use_kernels(kernels, monkeypatch)
    engine = train(CorrectedMomentumSGD(
        cpu_kernel=updates.corrected_momentum_sgd))
    chainers = train(chainer.optimizers.CorrectedMomentumSGD())
    for a, b in zip(engine, chainers):
        numpy.testing.assert_array_equal(a, b)
