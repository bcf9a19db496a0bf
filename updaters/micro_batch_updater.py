"""One update from K micro-batches per worker ("virtual workers").

Each micro-batch is normalized by its own BN statistics and its gradient is
added to the others' with weight 1/K, so after the all-reduce the gradient is
the mean over all K x workers micro-batches: 2 processes with K = 512 and 32
images each train with the semantics of 1024 GPUs x 32 images.
"""
import chainer
from chainer import reporter
from chainer import training

from errors import NonFiniteGradientError


class MicroBatchUpdater(training.updaters.StandardUpdater):
    """``StandardUpdater`` over ``micro_batches`` micro-batches per update.

    Reported values (``main/loss``, ``main/accuracy``) are the means over the
    micro-batches. A :class:`~errors.NonFiniteGradientError` from the
    all-reduce or from :class:`~optimizers.NonFiniteGradientGuard` either
    stops training (``on_non_finite='stop'``, the error names the iteration)
    or skips that update (``'skip'``) and counts it in ``skipped_updates``.
    """

    def __init__(self, iterator, optimizer, converter, device,
                 micro_batches=1, on_non_finite='stop'):
        super(MicroBatchUpdater, self).__init__(
            iterator, optimizer, converter=converter, device=device)
        if on_non_finite not in ('stop', 'skip'):
            raise ValueError('on_non_finite must be stop or skip')
        self.micro_batches = micro_batches
        self.on_non_finite = on_non_finite
        self.skipped_updates = 0

    def update_core(self):
        iterator = self._iterators['main']
        optimizer = self._optimizers['main']
        model = optimizer.target
        model.cleargrads()
        summary = reporter.DictSummary()
        for _ in range(self.micro_batches):
            batch = iterator.next()
            in_arrays = self.converter(batch, self.device)
            observation = {}
            with reporter.report_scope(observation):
                loss = model(*in_arrays)
            summary.add(observation)
            (loss / self.micro_batches).backward()
            del loss
        reporter.report(summary.compute_mean())
        try:
            optimizer.update()
        except NonFiniteGradientError as e:
            if self.on_non_finite == 'stop':
                raise NonFiniteGradientError(
                    e.count, '{} at iteration {}'.format(
                        e.param_name, self.iteration + 1))
            model.cleargrads()
            self.skipped_updates += 1
        reporter.report({'skipped_updates': self.skipped_updates})

    def serialize(self, serializer):
        super(MicroBatchUpdater, self).serialize(serializer)
        self.skipped_updates = serializer('skipped_updates',
                                          self.skipped_updates)
