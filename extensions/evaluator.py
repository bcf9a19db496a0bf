"""Validation that counts every image exactly once over all workers."""
import copy

import chainer
import chainer.functions as F
from chainer.training import extensions
import numpy


class DistributedEvaluator(extensions.Evaluator):
    """Top-1, top-5 and loss over the union of the workers' validation shards.

    Each worker scores its own disjoint shard (no wrap-around padding) and the
    sums of loss, hits and image counts are all-reduced, so every image counts
    once however unevenly the set divides. Reports ``validation/main/loss``,
    ``validation/main/accuracy`` (top-1) and ``validation/main/top5``.
    ``progress``, if given, is called after each batch (the stall
    watchdog's mark: a validation is many steps, each bounded).
    """

    def __init__(self, iterator, predictor, comm, converter, device,
                 progress=None):
        super(DistributedEvaluator, self).__init__(
            iterator, predictor, converter=converter, device=device)
        self.comm = comm
        self.progress = progress

    def evaluate(self):
        iterator = self.get_iterator('main')
        predictor = self.get_target('main')
        if hasattr(iterator, 'reset'):
            iterator.reset()
            it = iterator
        else:
            it = copy.copy(iterator)
        sums = numpy.zeros(4)  # loss, top-1 hits, top-5 hits, images
        with chainer.no_backprop_mode(), chainer.using_config('train', False):
            for batch in (it if len(it.dataset) else ()):  # may be empty
                x, t = self.converter(batch, self.device)
                sums += batch_sums(predictor(x).array, t)
                if self.progress:
                    self.progress()
        loss, top1, top5, count = self.comm.mpi_comm.allreduce(sums)
        observation = {}
        with chainer.reporter.report_scope(observation):
            chainer.report({'loss': loss / count, 'accuracy': top1 / count,
                            'top5': top5 / count}, predictor)
        return observation


def batch_sums(y, t, k=5):
    """Summed loss, top-1 hits, top-k hits and the count of one batch."""
    xp = chainer.backend.get_array_module(y)
    loss = F.softmax_cross_entropy(y, t, reduce='no').array.sum()
    k = min(k, y.shape[1])
    top_k = xp.argpartition(-y, k - 1, axis=1)[:, :k]
    top1 = (y.argmax(axis=1) == t).sum()
    topk = (top_k == t[:, None]).any(axis=1).sum()
    return numpy.array([float(loss), float(top1), float(topk), len(t)])
