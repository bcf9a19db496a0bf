"""Syncing final-batch BN statistics over N workers with different data.

Prints ``ok <check>`` for each check that passed on this rank.
"""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import chainermn
import numpy

from models import FinalBatchNormalization
from extensions.final_batch_statistics import sync_final_batch_statistics

chainermn.global_except_hook.add_hook()  # a failed check aborts every rank
comm = chainermn.create_communicator('naive')
rank = comm.rank
rng = numpy.random.RandomState(rank)


def batch():
    """A batch whose channel means and variances differ between workers."""
    return (rng.standard_normal((4, 3, 2, 2)) * (rank + 1)
            + 3 * rank).astype(numpy.float32)


model = chainer.Chain()
with model.init_scope():
    model.last = FinalBatchNormalization(3, variance='mean')
    model.window = FinalBatchNormalization(3, variance='union',
                                           micro_batches=2)
for _ in range(3):
    model.last(batch())
for _ in range(2):  # a first window of two micro-batches
    model.window(batch())
seen = [batch(), batch()]  # the last window
for x in seen:
    model.window(x)

links = (model.last, model.window)
mine = [[a.copy() for a in link.kept_statistics] for link in links]
everyone = comm.mpi_comm.allgather(mine)
inputs = numpy.concatenate(
    [x for xs in comm.mpi_comm.allgather(seen) for x in xs])
assert not numpy.allclose(everyone[0][0][0], everyone[-1][0][0])

assert sync_final_batch_statistics(model, comm) == 2
for i, link in enumerate(links):
    for j, kept in enumerate(link.kept_statistics):
        average = numpy.mean([stats[i][j] for stats in everyone], axis=0)
        numpy.testing.assert_allclose(kept, average, rtol=1e-6, atol=1e-6)
        gathered = comm.mpi_comm.allgather(kept)
        assert all(numpy.array_equal(kept, other) for other in gathered)
print('ok average')

mean, var = model.last.statistics()
numpy.testing.assert_allclose(
    var, numpy.mean([stats[0][1] for stats in everyone], axis=0), rtol=1e-6)
mean, var = model.window.statistics()
numpy.testing.assert_allclose(mean, inputs.mean(axis=(0, 2, 3)), rtol=1e-5,
                              atol=1e-5)
numpy.testing.assert_allclose(var, inputs.var(axis=(0, 2, 3)), rtol=1e-5)
print('ok readings')

x = batch()
with chainer.using_config('train', False):
    for link in links:
        mean, var = link.statistics()
        expected = ((x - mean[None, :, None, None])
                    / numpy.sqrt(var[None, :, None, None] + link.eps))
        numpy.testing.assert_allclose(link(x).array, expected, rtol=1e-5,
                                      atol=1e-5)
print('ok test mode')

model.last(batch())
sync_final_batch_statistics(model.last, comm)
gathered = comm.mpi_comm.allgather(model.last.batch_mean)
assert all(numpy.array_equal(gathered[0], other) for other in gathered)
print('ok link sync')
