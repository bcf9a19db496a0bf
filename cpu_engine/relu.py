"""Multi-threaded ReLU, alone or fused with the residual sum.

Chainer's NumPy ReLU is one single-threaded pass per direction, and the
residual ``F.relu(h + shortcut)`` adds a third array and another pass. Here

    y = max(x_1 + ... + x_n, 0),    gx_i = gy [y > 0]

runs in one pass of the C loops of ``cpu_engine._kernels`` for float32
(split over OpenMP threads), else over L2-sized blocks of the arrays'
memory on the threads of :func:`cpu_engine.cpu_runtime.parallel_for`.
Arrays that share one dense memory order (channel-major activations do)
are processed flat; others go through plain NumPy expressions. float16
arrays are processed in float32 (:mod:`cpu_engine.float16`): the sum is
rounded once.
"""
import numpy

from chainer import function_node
from chainer.functions.activation import relu as chainer_relu
from chainer.functions.activation.relu import ReLUGrad2
from chainer.utils import type_check

from cpu_engine.cpu_runtime import dense_views
from cpu_engine.cpu_runtime import numpy_inputs
from cpu_engine.cpu_runtime import native_kernels
from cpu_engine.cpu_runtime import parallel_for
from cpu_engine.float16 import in_float32

# Elements per block: a few float32 arrays of it stay in L2.
BLOCK = 1 << 16


def _blockwise(kernel, flats):
    """``kernel(*blocks)`` over aligned blocks of the 1-D ``flats``."""
    n = flats[0].size

    def run(lo, hi):
        for i in range(lo * BLOCK, min(hi * BLOCK, n), BLOCK):
            kernel(*[f[i:i + BLOCK] for f in flats])
    parallel_for(run, -(-n // BLOCK))


def _zeros(dtype, _cache={}):
    """A read-only block of zeros: ``maximum`` against an array beats a
    broadcast scalar 0 by about 1.5x."""
    if dtype not in _cache:
        zeros = numpy.zeros(BLOCK, dtype)
        zeros.flags.writeable = False
        _cache[dtype] = zeros
    return _cache[dtype]


def _relu_of_sum(out, first, *rest):
    if rest:
        numpy.add(first, rest[0], out=out)
        for r in rest[1:]:
            out += r
        first = out
    numpy.maximum(first, _zeros(out.dtype)[:out.size], out=out)


def _mask(out, gy, y):
    numpy.greater(y, 0, out=out)
    out *= gy


class ReLU(function_node.FunctionNode):
    """``max(sum(inputs), 0)`` of NumPy arrays of one shape and dtype."""

    def check_type_forward(self, in_types):
        type_check.expect(in_types.size() >= 1)
        for t in in_types:
            type_check.expect(t.dtype.kind == 'f',
                              t.dtype == in_types[0].dtype,
                              t.shape == in_types[0].shape)

    def forward_cpu(self, inputs):
        self.retain_outputs((0,))
        if inputs[0].dtype == numpy.float16:
            return in_float32(self._forward, inputs)
        return self._forward(inputs)

    def _forward(self, inputs):
        y = numpy.empty_like(inputs[0])
        flats = dense_views(y, *inputs)
        kernels = native_kernels(*flats) if flats else None
        if flats is None:
            y[...] = numpy.maximum(sum(inputs[1:], inputs[0]), 0)
        elif kernels is not None and len(inputs) <= 2:
            kernels.relu(*flats)
        else:
            _blockwise(_relu_of_sum, flats)
        return y,

    def backward(self, indexes, grad_outputs):
        y, = self.get_retained_outputs()
        gx, = ReLUGrad(y.raw_array).apply(grad_outputs)
        return (gx,) * len(indexes)


class ReLUGrad(function_node.FunctionNode):
    """``gy [y > 0]``; its own gradient, ``ggx [y > 0]``, is Chainer's
    ``ReLUGrad2``."""

    def __init__(self, y):
        self.y = y

    def forward_cpu(self, inputs):
        if self.y.dtype == numpy.float16:
            return in_float32(self._forward, inputs + (self.y,))
        return self._forward(inputs + (self.y,))

    def _forward(self, inputs):
        gy, y = inputs
        gx = numpy.empty_like(y)
        flats = dense_views(gx, gy, y)
        kernels = native_kernels(*flats) if flats else None
        if flats is None:
            gx = gy * (y > 0)
        elif kernels is not None:
            kernels.relu_grad(*flats)
        else:
            _blockwise(_mask, flats)
        return gx,

    def backward(self, indexes, grad_outputs):
        return ReLUGrad2(self.y).apply(grad_outputs)


def relu(x):
    """Drop-in ``chainer.functions.relu`` with a multi-threaded NumPy path."""
    if not numpy_inputs(x):
        return chainer_relu.relu(x)
    return ReLU().apply((x,))[0]


def add_relu(x, shortcut):
    """``relu(x + shortcut)`` in one pass: the residual block's output."""
    if not numpy_inputs(x, shortcut):
        return chainer_relu.relu(x + shortcut)
    return ReLU().apply((x, shortcut))[0]
