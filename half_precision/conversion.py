"""float32 <-> float16 conversions of the float16 gradient all-reduce and the
CPU engine.

NumPy 1.23 converts between float16 and float32 one element at a time
(2-4 ns per element), several times the cost of a float32 add, which made
the ring slower than a float32 all-reduce. The ``half_precision._half``
extension (built by setup.py where a C compiler exists) converts eight
values per F16C instruction, with the bits of NumPy's ``astype``. Where it
is absent, or for arrays that are not C-contiguous, these functions are
NumPy's own.
"""
import numpy

try:
    from half_precision import _half
except ImportError:
    _half = None

#: True when the C extension is in use.
NATIVE = _half is not None


def _conversion(name, first, second, fallback, doc):
    """A conversion ``name(a, b)``: the extension's, else ``fallback``.

    ``first`` and ``second`` are the ``(argument name, dtype)`` of ``a`` and
    ``b``, which must be NumPy arrays of one shape; the extension takes them
    when both are C-contiguous.
    """
    def convert(a, b, *scale):
        for (arg, dtype), array in ((first, a), (second, b)):
            if not isinstance(array, numpy.ndarray) or array.dtype != dtype:
                raise ValueError('{}: {} must be a numpy.ndarray of {}, got {}'
                                 .format(name, arg, numpy.dtype(dtype),
                                         getattr(array, 'dtype', type(array))))
        if a.shape != b.shape:
            raise ValueError('{}: {} has shape {} but {} has shape {}'.format(
                name, first[0], a.shape, second[0], b.shape))
        if _half is not None and a.flags.c_contiguous and b.flags.c_contiguous:
            getattr(_half, name)(a, b, *scale)
        else:
            fallback(a, b, *scale)
    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = doc
    return convert


to_half = _conversion(
    'to_half', ('src', numpy.float32), ('out', numpy.float16),
    lambda src, out: numpy.copyto(out, src, casting='same_kind'),
    """``out[...] = src`` rounded to float16 (nearest even, overflow to inf).

    Args:
        src (numpy.ndarray): float32 values.
        out (numpy.ndarray): float16 array of the same shape.
    """)

add_half = _conversion(
    'add_half', ('acc', numpy.float32), ('half', numpy.float16),
    lambda acc, half: numpy.add(acc, half, out=acc),
    """``acc += half``, the float16 ``half`` added in float32.

    Args:
        acc (numpy.ndarray): float32 accumulator, updated in place.
        half (numpy.ndarray): float16 array of the same shape.
    """)

to_float = _conversion(
    'to_float', ('src', numpy.float16), ('out', numpy.float32),
    lambda src, out: numpy.copyto(out, src),
    """``out[...] = src``, float16 widened to float32 (exact).

    Args:
        src (numpy.ndarray): float16 values.
        out (numpy.ndarray): float32 array of the same shape.
    """)

to_float_scaled = _conversion(
    'to_float_scaled', ('src', numpy.float16), ('out', numpy.float32),
    lambda src, out, scale: numpy.multiply(src, numpy.float32(scale),
                                           out=out, dtype=numpy.float32),
    """``out[...] = src * scale``: float16 widened, then one float32 product.

    Args:
        src (numpy.ndarray): float16 values.
        out (numpy.ndarray): float32 array of the same shape.
        scale (float): the factor, taken as a float32.
    """)


def max_abs(src):
    """The largest magnitude in the float32 array ``src`` as a float: inf
    when it holds inf or NaN, 0.0 when it is empty."""
    if not isinstance(src, numpy.ndarray) or src.dtype != numpy.float32:
        raise ValueError('max_abs: src must be a numpy.ndarray of float32, '
                         'got {}'.format(getattr(src, 'dtype', type(src))))
    if _half is not None and src.flags.c_contiguous:
        return _half.max_abs(src)
    if src.size == 0:
        return 0.
    bits = (src.view(numpy.uint32) & numpy.uint32(0x7fffffff)).max()
    return float(numpy.uint32(min(bits, 0x7f800000)).view(numpy.float32))
