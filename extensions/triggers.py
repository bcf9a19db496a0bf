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
                trigger.serialize(serializer[str(i)])
