"""An optimizer hook that refuses to apply a non-finite gradient."""
import chainer

from errors import NonFiniteGradientError


class NonFiniteGradientGuard(object):
    """Raises :class:`~errors.NonFiniteGradientError` before the update
    rules run if any (all-reduced) gradient holds inf or NaN.

    The all-reduced gradients are identical on every worker, so all workers
    raise in the same iteration and none applies the update.
    """

    name = 'NonFiniteGradientGuard'
    call_for_each_param = False
    timing = 'pre'

    def __call__(self, optimizer):
        params = [(name, p) for name, p in optimizer.target.namedparams()
                  if p.grad is not None]
        if not params:
            return
        xp = chainer.backend.get_array_module(params[0][1].grad)
        bad = xp.stack([xp.count_nonzero(~xp.isfinite(p.grad))
                        for _, p in params])
        counts = chainer.backend.CpuDevice().send(bad)
        if counts.any():
            first = params[int(counts.nonzero()[0][0])][0]
            raise NonFiniteGradientError(int(counts.sum()), first)
