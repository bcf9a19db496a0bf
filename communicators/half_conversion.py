"""float32 <-> float16 conversions of the float16-wire ring all-reduce.

NumPy 1.23 converts between float16 and float32 one element at a time
(2-4 ns per element), several times the cost of a float32 add, which made
the ring slower than a float32 all-reduce. The ``communicators._half``
extension (built by setup.py where a C compiler exists) converts eight
values per F16C instruction, with the bits of NumPy's ``astype``. Where it
is absent, or for arrays that are not C-contiguous, these functions are
NumPy's own.
"""
import numpy

try:
    from communicators import _half
except ImportError:
    _half = None

#: True when the C extension is in use.
NATIVE = _half is not None


def _check(function, pairs):
    shapes = []
    for name, array, dtype in pairs:
        if not isinstance(array, numpy.ndarray) or array.dtype != dtype:
            raise ValueError('{}: {} must be a numpy.ndarray of {}, got {}'
                             .format(function, name, numpy.dtype(dtype),
                                     getattr(array, 'dtype', type(array))))
        shapes.append(array.shape)
    if shapes[0] != shapes[1]:
        raise ValueError('{}: {} has shape {} but {} has shape {}'.format(
            function, pairs[0][0], shapes[0], pairs[1][0], shapes[1]))
    return _half is not None and all(
        array.flags.c_contiguous for _, array, _ in pairs)


def to_half(src, out):
    """``out[...] = src`` rounded to float16 (nearest even, overflow to inf).

    Args:
        src (numpy.ndarray): float32 values.
        out (numpy.ndarray): float16 array of the same shape.
    """
    if _check('to_half', [('src', src, numpy.float32),
                          ('out', out, numpy.float16)]):
        _half.to_half(src, out)
    else:
        numpy.copyto(out, src, casting='same_kind')


def add_half(acc, half):
    """``acc += half``, the float16 ``half`` added in float32.

    Args:
        acc (numpy.ndarray): float32 accumulator, updated in place.
        half (numpy.ndarray): float16 array of the same shape.
    """
    if _check('add_half', [('acc', acc, numpy.float32),
                           ('half', half, numpy.float16)]):
        _half.add_half(acc, half)
    else:
        numpy.add(acc, half, out=acc)


def to_float(src, out):
    """``out[...] = src``, float16 widened to float32 (exact).

    Args:
        src (numpy.ndarray): float16 values.
        out (numpy.ndarray): float32 array of the same shape.
    """
    if _check('to_float', [('src', src, numpy.float16),
                           ('out', out, numpy.float32)]):
        _half.to_float(src, out)
    else:
        numpy.copyto(out, src)
