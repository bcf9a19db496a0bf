"""Power-of-two scales that put a float16 gradient sum at the top of its range.

Both float16 communicators sum ``g_i * s`` over the ``p`` workers in float16
and divide the sum by ``s * p`` in float32 afterwards, with one ``s`` per
parameter: the largest power of two with

    p * m * s * (1 + 2^-11)^p <= 65504,

``m`` the parameter's largest gradient magnitude over all workers (one small
MAX all-reduce per update). Every partial sum of the reduction is at most
``p * m * s``, and each of the at most ``p`` roundings to float16 on its way
adds at most ``2^-11`` of it, so no finite gradient overflows; and the
largest sum lands in float16's top binade, so that small elements keep as
many significant bits as float16 has. A power of two is exact to apply and
to undo. Dividing by ``p`` first (the order before the sum) moves every
element ``log2 p`` binary orders towards float16's subnormals; summing
unscaled gradients (ChainerMN's order) overflows as soon as a sum passes
65504.

Scales per parameter rather than one per update: ResNet-50's parameters'
gradients differ by orders of magnitude, and with one scale the small
ones' elements fall under float16's normal range
(``benchmarks/fp16_precision.py``, docs/communication.md).
"""
import chainer
import numpy

from half_precision import segmented

#: float16's largest finite value.
FLOAT16_MAX = 65504.
#: Scales stay in [2^-EXPONENT_LIMIT, 2^EXPONENT_LIMIT], so that ``s`` and
#: ``1 / (s p)`` are normal float32 numbers for any p below 2^20.
EXPONENT_LIMIT = 100
_FLOAT16_MAGNITUDE = numpy.uint16(0x7fff)
_FLOAT16_INF = numpy.uint16(0x7c00)


def max_abs(g):
    """The largest magnitude of the NumPy array ``g`` (float16 or float32)
    as a float32 scalar, inf when ``g`` holds inf or NaN (so that a MAX
    all-reduce of maxima keeps a non-finite one)."""
    from half_precision import conversion  # the CPU's, F16C
    if g.dtype == numpy.float16:
        if g.size == 0:
            return numpy.float32(0)
        bits = (g.view(numpy.uint16) & _FLOAT16_MAGNITUDE).max()
        return numpy.float32(numpy.inf if bits >= _FLOAT16_INF else
                             bits.view(numpy.float16))
    return numpy.float32(conversion.max_abs(
        numpy.ascontiguousarray(g, numpy.float32)))


def maxima(grads):
    """float32 array of :func:`max_abs` of each of ``grads`` (all on one
    device; on a GPU one kernel over all of them)."""
    if not grads:
        return numpy.zeros(0, numpy.float32)
    if chainer.backend.get_array_module(grads[0]) is numpy:
        return numpy.array([max_abs(g) for g in grads], numpy.float32)
    return segmented.max_abs(grads)


def scales(peaks, summands):
    """The power-of-two scale of each parameter, float32, same device.

    Args:
        peaks: float32 array, each parameter's largest gradient magnitude
            over all ``summands`` gradients that are summed.
        summands (int): how many gradients the float16 sum adds (the
            number of workers ``p``).

    Returns:
        The largest powers of two ``s`` with ``summands * peak * s *
        (1 + 2^-11)^summands <= 65504``, within ``2^+-EXPONENT_LIMIT``;
        1 where the peak is zero or not finite (a non-finite gradient then
        stays non-finite in the sum, where the communicator counts it).
    """
    xp = chainer.backend.get_array_module(peaks)
    limit = _limit(summands)
    m = peaks.astype(numpy.float64)
    with numpy.errstate(divide='ignore', invalid='ignore', over='ignore'):
        e = xp.floor(xp.log2(limit / m))
        e -= m * xp.exp2(e) > limit  # log2's rounding, if any
        e = xp.where(xp.isfinite(e),
                     xp.clip(e, -EXPONENT_LIMIT, EXPONENT_LIMIT), 0.)
    return xp.exp2(e).astype(numpy.float32)


def _limit(summands):
    """The largest ``peak * s`` whose float16 sum over ``summands`` workers
    stays finite."""
    return FLOAT16_MAX / (summands * (1. + 2. ** -11) ** summands)


def finite_by_construction(peaks, scales, summands):
    """True when the float16 sum of gradients scaled by ``scales`` cannot
    hold inf or NaN: every peak is finite and within the limit (it is not,
    after scaling, only where a non-finite gradient made the peak inf or a
    peak beyond 2^EXPONENT_LIMIT clipped the scale). NumPy arrays only."""
    with numpy.errstate(invalid='ignore', over='ignore'):
        return bool((peaks.astype(numpy.float64) * scales
                     <= _limit(summands)).all())


def inverses(scales, summands):
    """``1 / (s * summands)`` of each scale, float32 (exact when
    ``summands`` is a power of two)."""
    return (1. / (scales.astype(numpy.float64) * summands)).astype(
        numpy.float32)


def round_as_worker(grads, summands):
    """Round each gradient of ``grads`` in place as a float16 all-reduce
    of ``summands`` workers rounds a worker's gradient: ``g * s`` to float16
    and back, ``s`` from the array's own largest magnitude by :func:`scales`.

    A micro-batch's gradient thus meets the rounding it would meet if a
    worker of its own sent it. The scale of a real worker follows the
    largest magnitude over all workers, which is at least this one's: the
    rounding is the same wherever the scaled value is a float16 normal, and
    below that the flush threshold is at most the real one. On a GPU it is
    one kernel over all the gradients (:mod:`half_precision.segmented`),
    with the same roundings.
    """
    grads = [g for g in grads if g is not None]
    if not grads:
        return
    s = scales(maxima(grads), summands)
    inv = inverses(s, 1)
    if chainer.backend.get_array_module(grads[0]) is not numpy:
        segmented.round_in_place(grads, s, inv)
        return
    from half_precision import conversion  # the CPU's, F16C
    for g, scale, inverse in zip(grads, s, inv):
        if g.dtype == numpy.float32 and g.flags.c_contiguous:
            half = numpy.empty(g.shape, numpy.float16)
            numpy.multiply(g, scale, out=g)
            conversion.to_half(g, half)
            conversion.to_float_scaled(half, g, inverse)
        else:
            scaled = (g.astype(numpy.float32) * scale).astype(numpy.float16)
            g[...] = scaled.astype(numpy.float32) * inverse
