"""An optimizer hook that refuses to apply a non-finite gradient."""
import chainer
import numpy

from largebatch.errors import NonFiniteGradientError

# A float16 is inf or NaN exactly when its magnitude bits reach 0x7c00.
_FP16_MAGNITUDE = numpy.uint16(0x7fff)
_FP16_INF = numpy.uint16(0x7c00)
_FP16_MINUS_INF = numpy.uint16(0xfc00)


def _count_non_finite(xp, g):
    """Non-finite elements of ``g``; NumPy's float16 ``isfinite`` runs one
    element at a time, so NumPy float16 arrays are read as 16-bit words (two
    vectorized maxima; the mask only when one is non-finite)."""
    if xp is numpy and g.dtype == numpy.float16:
        bits = g.view(numpy.uint16)
        if g.size == 0 or (bits.view(numpy.int16).max() < _FP16_INF
                           and bits.max() < _FP16_MINUS_INF):
            return 0
        return numpy.count_nonzero((bits & _FP16_MAGNITUDE) >= _FP16_INF)
    return xp.count_nonzero(~xp.isfinite(g))


class NonFiniteGradientGuard(object):
    """Raises :class:`~largebatch.errors.NonFiniteGradientError` before the
    update rules run if any (all-reduced) gradient holds inf or NaN.

    The all-reduced gradients are identical on every worker, so all workers
    raise in the same iteration and none applies the update.

    Args:
        mean_checked (bool): the communicator checks the mean itself and
            raises the same error (``mpi_fp16``, ``pure_nccl_fp16``:
            :class:`communicators.Abilities`); the multi-node optimizer runs
            its mean before every update, so the guard then scans nothing
            (on a GPU the scan reads every gradient again and waits for the
            device). Otherwise every update is scanned.
    """

    name = 'NonFiniteGradientGuard'
    call_for_each_param = False
    timing = 'pre'

    def __init__(self, mean_checked=False):
        self.mean_checked = mean_checked

    def __call__(self, optimizer):
        if self.mean_checked:
            return
        params = [(name, p) for name, p in optimizer.target.namedparams()
                  if p.grad is not None]
        if not params:
            return
        xp = chainer.backend.get_array_module(params[0][1].grad)
        bad = xp.stack([xp.asarray(_count_non_finite(xp, p.grad))
                        for _, p in params])
        counts = chainer.backend.CpuDevice().send(bad)
        if counts.any():
            first = params[int(counts.nonzero()[0][0])][0]
            raise NonFiniteGradientError(int(counts.sum()), first)
