"""extensions.final_batch_statistics on one process, with a stand-in for the
communicator; tests/integration/test_final_batch_bn.py runs it on MPI."""
import chainer
import chainer.links as L
from chainer import training
import numpy

from extensions import final_batch_statistics
from extensions import SyncFinalBatchStatistics
from models import FinalBatchNormalization


class SummingComm(object):
    """``allreduce`` adds the buffers that ``others`` (workers of the same
    job) sent to the one it is given."""

    def __init__(self, others=()):
        self.others = list(others)
        self.size = 1 + len(self.others)
        self.sent = []

    def allreduce(self, x):
        self.sent.append(x.copy())
        return x + sum(self.others)


def worker_model(rank):
    """Two final-batch BN links that have seen this worker's batches."""
    rng = numpy.random.RandomState(rank)
    model = chainer.Chain()
    with model.init_scope():
        model.b = FinalBatchNormalization(3, variance='union',
                                          micro_batches=2)
        model.a = FinalBatchNormalization(3)
        model.fc = L.Linear(2, 2)
    for link in (model.a, model.b, model.b):
        link((rng.standard_normal((4, 3, 2, 2)) * (rank + 1)
              + rank).astype(numpy.float32))
    return model


def kept(model):
    return [a.copy() for link in (model.a, model.b)
            for a in link.kept_statistics]


def test_sync_leaves_the_average_over_workers():
    others = [worker_model(rank) for rank in (1, 2)]
    sent = []
    for model in others:  # alone in its job, a worker's sync changes nothing
        before = kept(model)
        comm = SummingComm()
        assert final_batch_statistics.sync_final_batch_statistics(
            model, comm) == 2
        for a, b in zip(kept(model), before):
            numpy.testing.assert_allclose(a, b, rtol=1e-7)
        sent.extend(comm.sent)
    model = worker_model(0)
    expected = [numpy.mean(arrays, axis=0) for arrays in zip(
        kept(model), *(kept(other) for other in others))]
    comm = SummingComm(sent)
    assert final_batch_statistics.sync_final_batch_statistics(
        model, comm) == 2
    (buffer,) = comm.sent
    assert buffer.dtype == numpy.float64 and buffer.size == 2 * 3 * 3
    for a, e in zip(kept(model), expected):
        assert a.dtype == numpy.float32
        numpy.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6)


def test_model_without_final_batch_links_makes_no_allreduce():
    comm = SummingComm()
    model = chainer.Sequential(L.Linear(2, 2), L.BatchNormalization(2))
    assert final_batch_statistics.sync_final_batch_statistics(
        model, comm) == 0
    assert comm.sent == []


def test_extension_fires_on_its_triggers_and_at_the_end(monkeypatch):
    x = numpy.random.RandomState(0).standard_normal((8, 2)).astype(
        numpy.float32)
    t = numpy.zeros(8, numpy.int32)
    model = L.Classifier(chainer.Sequential(
        L.Linear(2, 3), FinalBatchNormalization(3), L.Linear(3, 2)))
    optimizer = chainer.optimizers.SGD(lr=0.01)
    optimizer.setup(model)
    updater = training.StandardUpdater(chainer.iterators.SerialIterator(
        chainer.datasets.TupleDataset(x, t), 2), optimizer)
    trainer = training.Trainer(updater, (5, 'iteration'))
    synced = []

    def sync(model_, comm):
        assert model_ is model
        synced.append(trainer.updater.iteration)
    monkeypatch.setattr(final_batch_statistics,
                        'sync_final_batch_statistics', sync)
    trainer.extend(SyncFinalBatchStatistics(
        model, SummingComm(), [(2, 'iteration'), (3, 'iteration')]))
    trainer.run()
    assert synced == [2, 3, 4, 5]
    assert SyncFinalBatchStatistics.priority > training.PRIORITY_WRITER
