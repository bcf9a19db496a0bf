"""Dynamic loss scaling for float16 gradients (Micikevicius et al., 2018).

The backward pass starts from ``scale`` instead of 1, so that gradients
that would flush to zero in float16 stay representable; the update rule
divides them by ``scale`` again in float32, after the all-reduce. An update
whose all-reduced gradient overflowed is skipped and the scale halved; after
``interval`` clean updates in a row it doubles:

    overflow:  scale = scale / 2,               clean = 0
    clean:     clean = clean + 1;  if clean == interval:
                   scale = min(2 scale, max_scale),  clean = 0

The scale stays a power of two, so multiplying and dividing by it is exact.
An overflow at ``min_scale`` is not the scale's doing: the gradient is not
finite even unscaled, a divergence (:meth:`DynamicLossScale.back_off`
returns False).

Chainer's ``optimizer.loss_scaling()`` grows its scale every update (x2
until the first overflow, then by ``2 ** (1 / interval)``), checks inside
the optimizer after the all-reduce has already raised, and keeps none of
its state in snapshots; this one is driven by
:class:`updaters.MicroBatchUpdater` and saved with it.
"""


class DynamicLossScale(object):
    """The loss scale of a mixed-precision run and its growth counter.

    Args:
        scale (float): initial scale, a power of two.
        interval (int): clean updates in a row after which it doubles.
        min_scale (float): the scale is never halved below this.
        max_scale (float): the scale never doubles above this.

    Attributes:
        scale (float): the current scale.
        clean_steps (int): clean updates since the last change.
        overflows (int): updates skipped for an overflow so far.
    """

    def __init__(self, scale=2.0 ** 10, interval=1000, min_scale=1.0,
                 max_scale=2.0 ** 24):
        if not min_scale <= scale <= max_scale:
            raise ValueError('loss scale {} is outside [{}, {}]'.format(
                scale, min_scale, max_scale))
        if interval < 1:
            raise ValueError('loss-scale interval must be positive, got '
                             '{}'.format(interval))
        self.scale = float(scale)
        self.interval = interval
        self.min_scale = float(min_scale)
        self.max_scale = float(max_scale)
        self.clean_steps = 0
        self.overflows = 0

    def grow(self):
        """Record a clean update; double the scale after ``interval``."""
        self.clean_steps += 1
        if self.clean_steps >= self.interval:
            self.scale = min(2 * self.scale, self.max_scale)
            self.clean_steps = 0

    def back_off(self):
        """Record an overflowed (skipped) update and halve the scale.

        Returns False, changing nothing, when the scale is already at
        ``min_scale``: then the overflow is a divergence.
        """
        if self.scale <= self.min_scale:
            return False
        self.scale = max(self.scale / 2, self.min_scale)
        self.clean_steps = 0
        self.overflows += 1
        return True

    def serialize(self, serializer):
        self.scale = float(serializer('scale', self.scale))
        self.clean_steps = int(serializer('clean_steps', self.clean_steps))
        self.overflows = int(serializer('overflows', self.overflows))
