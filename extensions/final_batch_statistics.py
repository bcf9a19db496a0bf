"""Average the final-batch BN statistics over all workers when they are used.

Akiba et al. (2017) validate with the statistics of the last training
minibatch averaged over the workers. The kept statistics are read by an
evaluation and written by a snapshot, so they are synced just before either
and once more at the end of training (the model a caller saves after
``trainer.run()``).
"""
from chainer import training
from chainer.training import triggers as trigger_module

from extensions.triggers import AnyOfTriggers
from models.final_batch_normalization import sync_final_batch_statistics


class SyncFinalBatchStatistics(training.Extension):
    """Syncs every :class:`models.FinalBatchNormalization` of ``model``.

    Register it on every worker (it makes one all-reduce, which all workers
    must enter in the same iterations) with the triggers of the evaluator and
    of the snapshot. Its priority is above theirs, so within one iteration
    it runs first; it also fires at the iteration where the trainer's stop
    trigger ends training (when that trigger reports its training length).
    It makes no collective call at teardown: after an error other workers
    may be gone.

    Args:
        model (chainer.Link): the model whose links to sync.
        comm: ChainerMN communicator.
        triggers: triggers (or ``(period, unit)`` specs) to fire on.
    """

    priority = training.PRIORITY_WRITER + 1

    def __init__(self, model, comm, triggers):
        self.model = model
        self.comm = comm
        self.trigger = AnyOfTriggers(triggers)

    def initialize(self, trainer):
        length = getattr(trainer.stop_trigger, 'get_training_length', None)
        if length is not None:
            self.trigger.triggers.append(
                trigger_module.IntervalTrigger(*length()))

    def __call__(self, trainer):
        sync_final_batch_statistics(self.model, self.comm)
