"""The optimizer's element-wise updates on NumPy arrays, on every core.

A kernel set for the ``cpu_kernel`` arguments of :mod:`optimizers`
(:func:`optimizers.recipes.create_optimizer` takes the module).

NumPy's expression form makes a temporary of the parameter's size per
operation and a dozen passes over memory. Here float32 C-contiguous arrays
go through one C loop on the OpenMP threads that reads each array once
(with NumPy's float32 rounding: no FMA contraction); other arrays go
through NumPy on L2-sized blocks, whose passes after the first hit cache.
float16 arrays (the parameters of a ``chainer.mixed16`` model, whose
optimizer hooks see them) are widened to float32 for the C loop and the
result rounded once (:mod:`cpu_engine.float16`).
"""
import numpy

from cpu_engine.cpu_runtime import native_kernels
from cpu_engine.cpu_runtime import parallel_elementwise
from cpu_engine.float16 import in_float32


def rmsprop_warmup(theta, g, m, delta, lr, mu1, mu2, eps, alpha_sgd,
                   alpha_rmsprop):
    """In place: ``m = mu2 m + (1 - mu2) g^2``, ``delta = mu1 delta -
    (alpha_sgd + alpha_rmsprop / (sqrt(m) + eps)) g``, ``theta += lr delta``
    (:mod:`optimizers.rmsprop_warmup`)."""
    kernels = native_kernels(theta, g, m, delta)
    if kernels is not None:
        kernels.rmsprop_warmup(theta, g, m, delta, lr, mu1, mu2, eps,
                               alpha_sgd, alpha_rmsprop)
        return

    def update(theta, g, m, delta):
        step = numpy.multiply(g, g)
        step *= 1 - mu2
        m *= mu2
        m += step
        if alpha_rmsprop:
            numpy.sqrt(m, out=step)
            step += eps
            numpy.divide(alpha_rmsprop, step, out=step)
            step += alpha_sgd
            step *= g
        else:
            numpy.multiply(g, alpha_sgd, out=step)
        delta *= mu1
        delta -= step
        numpy.multiply(delta, lr, out=step)
        theta += step
    parallel_elementwise(update, theta, g, m, delta)


def corrected_momentum_sgd(theta, g, v, lr, momentum):
    """In place: ``v = momentum v - g``, ``theta += lr v``
    (:mod:`optimizers.corrected_momentum_sgd`)."""
    kernels = native_kernels(theta, g, v)
    if kernels is not None:
        kernels.corrected_momentum_sgd(theta, g, v, lr, momentum)
        return

    def update(theta, g, v):
        v *= momentum
        v -= g
        theta += numpy.multiply(v, lr)
    parallel_elementwise(update, theta, g, v)


def weight_decay(g, theta, rate):
    """In place: ``g += rate * theta``."""
    if g.dtype == numpy.float16:
        def decay32(arrays):
            weight_decay(*arrays, rate=rate)
            return arrays[:1]
        g[...], = in_float32(decay32, (g, theta))
        return
    kernels = native_kernels(g, theta)
    if kernels is not None:
        kernels.weight_decay(g, theta, rate)
        return

    def decay(theta, g):
        g += numpy.multiply(theta, rate)
    parallel_elementwise(decay, theta, g)
