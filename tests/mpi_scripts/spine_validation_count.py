"""The distributed evaluator counts each validation image exactly once."""
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import chainermn
import numpy

from image_data.validation import validation_shard
from extensions import DistributedEvaluator


class Oracle(chainer.Link):
    """Right on images whose id is a multiple of 3; top-2 right when even."""

    def forward(self, x):
        ids = x[:, 0].astype(int)
        y = numpy.zeros((len(ids), 10), numpy.float32)
        y[:, 9] = 2  # the wrong top-1 guess
        y[ids % 3 == 0, 0] = 3  # label 0 is the answer for every image
        y[ids % 2 == 0, 0] = numpy.maximum(y[ids % 2 == 0, 0], 1)
        return chainer.Variable(y)


comm = chainermn.create_communicator('naive')
n = int(sys.argv[1])
val = [(numpy.array([i], numpy.float32), numpy.int32(0)) for i in range(n)]
shard = validation_shard(val, comm.rank, comm.size)
it = chainer.iterators.SerialIterator(shard, 2, repeat=False, shuffle=False)
evaluator = DistributedEvaluator(it, Oracle(), comm,
                                 chainer.dataset.concat_examples, None)
result = evaluator()
ids = numpy.arange(n)
expected_top1 = (ids % 3 == 0).mean()
expected_top2 = ((ids % 3 == 0) | (ids % 2 == 0)).mean()
print('rank', comm.rank, result)
assert abs(result['main/accuracy'] - expected_top1) < 1e-12, result
assert abs(result['main/top5'] - 1.0) < 1e-12, result  # 10 classes: 0 in top-5
assert sum(comm.mpi_comm.allgather(len(shard))) == n
