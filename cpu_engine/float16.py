"""float16 storage with float32 arithmetic, for ``chainer.mixed16`` on CPU.

NumPy has no float16 BLAS: its float16 matmul runs element by element and
accumulates in float16 (it overflows on a convolution's sums), and its
float16 element-wise operations cost about 30 ns per element, 15 times
their float32 ones. So the fast paths take float16 arrays by widening them
to float32 (exact), running their float32 code (oneDNN, the C loops) and
rounding each result to float16 once: float16 storage and float32
accumulation, as GPU tensor cores compute. The conversions are
:mod:`half_precision.conversion`'s (F16C, about 1 ns per element) and
keep the array's memory order, so channel-major activations stay so.
"""
import numpy

from half_precision.conversion import to_float
from half_precision.conversion import to_half


def _convert(a, dtype, convert):
    """A ``dtype`` copy of ``a`` in ``a``'s memory order (C order if it
    has none), converted by ``convert(src, out)``."""
    order = numpy.argsort(a.strides, kind='stable')[::-1]
    dense = a.transpose(order)
    if not dense.flags.c_contiguous:
        order = numpy.arange(a.ndim)
        dense = numpy.ascontiguousarray(a)
    out = numpy.empty(dense.shape, dtype)
    convert(dense, out)
    return out.transpose(numpy.argsort(order))


def widen(a):
    """The float32 copy of the float16 array ``a``."""
    return _convert(a, numpy.float32, to_float)


def narrow(a):
    """``a`` rounded to float16 (nearest even, overflow to inf)."""
    return _convert(a, numpy.float16, to_half)


def in_float32(forward, inputs):
    """``forward(inputs)`` on the float32 copies of the float16 ``inputs``,
    its outputs rounded to float16 (a float32 input stays as it is)."""
    wide = tuple(widen(a) if a.dtype == numpy.float16 else a
                 for a in inputs)
    return tuple(narrow(y) for y in forward(wide))
