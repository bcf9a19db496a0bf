"""Trainer extension that sets an optimizer hyperparameter every iteration."""
import chainer
from chainer import training


class HyperparameterSchedule(training.Extension):

    """Sets ``optimizer.<attr> = schedule(epoch_detail)`` before each update.

    The value is a pure function of the updater's fractional epoch, so the
    extension has no state of its own and a resumed run continues exactly.
    It sets the first value when training starts (or resumes) and, after
    each update, reports under the key ``attr`` the value that update used
    (for ``LogReport`` and ``PlotReport``), then sets the next one.

    Args:
        attr (str): name of the hyperparameter, e.g. ``'lr'``.
        schedule (callable): fractional epoch -> value.
        optimizer (~chainer.Optimizer): optimizer to drive; by default the
            updater's main optimizer. A ChainerMN multi-node optimizer
            passes the attribute on to the optimizer it wraps.
    """

    trigger = 1, 'iteration'
    priority = training.PRIORITY_WRITER

    def __init__(self, attr, schedule, optimizer=None):
        self.attr = attr
        self.schedule = schedule
        self.name = '{}_schedule'.format(attr)
        self._optimizer = optimizer

    def initialize(self, trainer):
        self._set(trainer)

    def __call__(self, trainer):
        optimizer = self._get_optimizer(trainer)
        chainer.reporter.report({self.attr: getattr(optimizer, self.attr)})
        self._set(trainer)

    def _set(self, trainer):
        value = self.schedule(trainer.updater.epoch_detail)
        setattr(self._get_optimizer(trainer), self.attr, value)

    def _get_optimizer(self, trainer):
        if self._optimizer is None:
            return trainer.updater.get_optimizer('main')
        return self._optimizer


def add_schedules(trainer, schedules, optimizer=None):
    """Adds one :class:`HyperparameterSchedule` per item of ``schedules``,
    ``{attr: function of the fractional epoch}`` (a recipe's:
    :func:`optimizers.recipes.hyperparameter_schedules`); every worker needs
    them. Returns the attributes, the keys they report under."""
    for attr, schedule in schedules.items():
        trainer.extend(HyperparameterSchedule(attr, schedule, optimizer))
    return list(schedules)
