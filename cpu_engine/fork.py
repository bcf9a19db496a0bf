"""One activation read by two layers, with its two gradients summed on the
engine's threads.

Where a variable feeds two functions, Chainer adds their gradients in its
backward loop with ``F.add``: NumPy on one thread. A residual block's input
feeds its first convolution and its shortcut, so ResNet-50 has 16 such
sums, over up to 100 MB each at 224 px. ``fork(x)`` returns ``x`` twice
through a node whose gradient is that sum,

    gx = g1 + g2,

one C loop of ``cpu_engine._kernels`` on the OpenMP threads for float32
arrays of one dense memory order (the activations' layout), else NumPy's
sum. A gradient that is to be differentiated again is Chainer's ``F.add``.
"""
import numpy

import chainer
from chainer import function_node
import chainer.functions

from cpu_engine.cpu_runtime import dense_views
from cpu_engine.cpu_runtime import numpy_inputs
from cpu_engine.cpu_runtime import native_kernels


class Fork(function_node.FunctionNode):
    """``(x, x)``; the gradient of ``x`` is the sum of the two outputs'."""

    def forward(self, inputs):
        x, = inputs
        return x, x

    def backward(self, indexes, grad_outputs):
        g1, g2 = grad_outputs
        if g1 is None or g2 is None:
            return g2 if g1 is None else g1,
        if chainer.config.enable_backprop:
            return chainer.functions.add(g1, g2),
        a, b = g1.array, g2.array
        gx = numpy.empty_like(a)
        views = dense_views(gx, a, b)
        kernels = native_kernels(*views) if views else None
        if kernels is None:
            numpy.add(a, b, out=gx)
        else:
            kernels.add(*views)
        return chainer.Variable(gx),


def fork(x):
    """``(x, x)`` for two layers to read; their gradients are summed on the
    engine's threads (:class:`Fork`) for NumPy arrays."""
    if not numpy_inputs(x):
        return x, x
    return Fork().apply((x,))
