"""Average the final-batch BN statistics over all workers when they are used.

Akiba et al. (2017) validate with the statistics of the last training
minibatch averaged over the workers. The kept statistics are read by an
evaluation and written by a snapshot, so they are synced just before either
and once more at the end of training (the model a caller saves after
``trainer.run()``).
"""
import numpy

from chainer import backend
from chainer import training
from chainer.training import triggers as trigger_module

from extensions.triggers import AnyOfTriggers
from models.final_batch_normalization import FinalBatchNormalization


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


def sync_final_batch_statistics(model, comm):
    """Average the kept statistics of every FinalBatchNormalization in model.

    All workers must call it together: it packs every such link's statistics
    (in the sorted order of their paths) into one buffer and makes one
    all-reduce of it through ``comm`` on the host. Returns the number of
    links synced.
    """
    links = [link for _, link in sorted(model.namedlinks())
             if isinstance(link, FinalBatchNormalization)]
    arrays = [a for link in links for a in link.kept_statistics]
    if not arrays:
        return 0
    host = numpy.concatenate(
        [backend.CpuDevice().send(a).ravel() for a in arrays]).astype(
            numpy.float64)
    total = comm.allreduce(host)
    total /= comm.size
    offset = 0
    for a in arrays:
        part = total[offset:offset + a.size].reshape(a.shape)
        a[...] = backend.get_device_from_array(a).send(part)
        offset += a.size
    return len(links)
