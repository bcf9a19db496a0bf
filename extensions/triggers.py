"""Trigger combinators shared by the BN sync, snapshots and logging."""
import copy

from chainer import training


class AnyOfTriggers(object):
    """Fires when any of ``triggers`` fires.

    Every trigger is asked at every iteration, so that stateful ones (such as
    ``IntervalTrigger``) stay in step. Each is a copy: a trigger object that
    an evaluator or snapshot also uses would otherwise be called twice per
    iteration and miss its own firing.
    """

    def __init__(self, triggers):
        self.triggers = [copy.deepcopy(training.get_trigger(t))
                         for t in triggers]

    def __call__(self, trainer):
        fired = [trigger(trainer) for trigger in self.triggers]
        return any(fired)

    def serialize(self, serializer):
        for i, trigger in enumerate(self.triggers):
            if hasattr(trigger, 'serialize'):
                try:
                    trigger.serialize(serializer[str(i)])
                except KeyError:
                    _forget(trigger)


def _forget(trigger):
    """Let an interval trigger that a snapshot does not hold (one older than
    it) take its previous position from the updater, as a new one does."""
    if isinstance(trigger, training.triggers.IntervalTrigger):
        trigger._previous_iteration = -1
        trigger._previous_epoch_detail = -1.
    else:
        raise KeyError('the snapshot holds no state for {!r}'.format(trigger))
