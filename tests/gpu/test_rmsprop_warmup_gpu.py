"""RMSpropWarmup's CuPy kernel against its NumPy update."""
import chainer
import numpy
import pytest

import gpu_marks
from optimizers import RMSpropWarmup

pytestmark = gpu_marks.GPU

STEPS = 30


def run(device, dtype):
    """Parameters after STEPS updates with lr and the alphas changing."""
    rng = numpy.random.RandomState(0)
    link = chainer.Link()
    with link.init_scope():
        link.w = chainer.Parameter(rng.randn(5, 7).astype(dtype))
    link.to_device(device)
    optimizer = RMSpropWarmup(mu1=0.9, mu2=0.99, eps=1e-8)
    optimizer.setup(link)
    for step in range(STEPS):
        optimizer.lr = rng.uniform(0.01, 1.0)
        optimizer.alpha_sgd = rng.uniform(0, 1)
        optimizer.alpha_rmsprop = rng.uniform(0, 0.1)
        link.w.grad = link.w.device.send(rng.randn(5, 7).astype(dtype))
        optimizer.update()
    state = link.w.update_rule.state
    return [chainer.backend.CpuDevice().send(a)
            for a in (link.w.array, state['m'], state['delta'])]


@pytest.mark.parametrize('dtype, rtol', [(numpy.float64, 1e-12),
                                         (numpy.float32, 1e-5)])
def test_gpu_kernel_matches_numpy_update(dtype, rtol):
    for gpu, cpu in zip(run('@cupy:0', dtype), run('@numpy', dtype)):
        assert gpu.dtype == dtype
        numpy.testing.assert_allclose(gpu, cpu, rtol=rtol, atol=rtol)
