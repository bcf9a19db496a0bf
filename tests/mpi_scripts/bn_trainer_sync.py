"""SyncFinalBatchStatistics in a Trainer on N workers with different data.

Evaluation every 2 iterations, a snapshot of the model (rank 0) every 3,
training stops at 5: the statistics must be synced before the evaluation and
the snapshot of an iteration and at the end, and nowhere else.
Prints ``ok <check>`` for each check that passed on this rank.
"""
import os
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import chainer.links as L
from chainer import training
from chainer.training import extensions as chainer_extensions
import chainermn
import numpy

import extensions
from models import FinalBatchNormalization

chainermn.global_except_hook.add_hook()  # a failed check aborts every rank
out = sys.argv[1]
comm = chainermn.create_communicator('naive')
rng = numpy.random.RandomState(comm.rank)
x = (rng.standard_normal((40, 2)) + comm.rank).astype(numpy.float32)
t = rng.randint(0, 2, 40).astype(numpy.int32)

predictor = chainer.Sequential(L.Linear(2, 3), FinalBatchNormalization(3),
                               L.Linear(3, 2))
bn = predictor[1]
model = L.Classifier(predictor)
optimizer = chainermn.create_multi_node_optimizer(
    chainer.optimizers.SGD(lr=0.1), comm)
optimizer.setup(model)
updater = training.StandardUpdater(
    chainer.iterators.SerialIterator(chainer.datasets.TupleDataset(x, t), 4),
    optimizer)
trainer = training.Trainer(updater, (5, 'iteration'), out=out)


def stats():
    return numpy.stack([a.copy() for a in bn.kept_statistics])


local, evaluated, after = {}, {}, {}


def recorder(record, priority, trigger=(1, 'iteration')):
    @training.make_extension(trigger=trigger, priority=priority)
    def ext(trainer):
        record[trainer.updater.iteration] = stats()
    ext.__name__ = 'record_{}'.format(priority)
    return ext


trainer.extend(recorder(local, training.PRIORITY_WRITER + 2))
trainer.extend(recorder(evaluated, training.PRIORITY_WRITER, (2, 'iteration')))
trainer.extend(recorder(after, -200))
trainer.extend(extensions.SyncFinalBatchStatistics(
    model, comm, [(2, 'iteration'), (3, 'iteration')]))
if comm.rank == 0:
    trainer.extend(chainer_extensions.snapshot_object(
        predictor, 'predictor_{.updater.iteration}'), trigger=(3, 'iteration'))
trainer.run()

everyone = comm.mpi_comm.allgather(local)
average = {i: numpy.mean([stats[i] for stats in everyone], axis=0)
           for i in local}
assert not numpy.allclose(everyone[0][1], everyone[-1][1])
for i in (1, 2, 3, 4, 5):
    expected = average[i] if i in (2, 3, 4, 5) else local[i]
    numpy.testing.assert_allclose(after[i], expected, rtol=1e-6, atol=1e-7)
for i in (2, 4):
    numpy.testing.assert_allclose(evaluated[i], average[i], rtol=1e-6,
                                  atol=1e-7)
print('ok synced iterations')
if comm.rank == 0:
    with numpy.load(os.path.join(out, 'predictor_3')) as snapshot:
        saved = numpy.stack([
            snapshot[key] for name in ('batch_mean', 'batch_var',
                                       'batch_mean_sq')
            for key in snapshot if key.endswith('/' + name)])
    numpy.testing.assert_allclose(saved, average[3], rtol=1e-6, atol=1e-7)
    print('ok snapshot')
