"""All-reduced mean gradient on N workers vs. one process on the union."""
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import chainer.links as L
import chainermn
import numpy

import cpu_engine
from models import ResNet50

comm = chainermn.create_communicator('naive')
per_worker = int(sys.argv[1])
rng = numpy.random.RandomState(0)
x = rng.randn(per_worker * comm.size, 3, 32, 32).astype(numpy.float32)
t = rng.randint(0, 10, len(x)).astype(numpy.int32)

numpy.random.seed(1)
# The layers train_imagenet.py builds the model from on NumPy arrays.
model = L.Classifier(ResNet50(n_class=10, layers=cpu_engine))
optimizer = chainermn.create_multi_node_optimizer(
    chainer.optimizers.SGD(lr=0), comm)
optimizer.setup(model)

with chainer.using_config('train', False):  # BN with fixed statistics
    model.cleargrads()
    model(x, t).backward()
    single = {n: p.grad.copy() for n, p in model.namedparams()}
    mine = slice(comm.rank * per_worker, (comm.rank + 1) * per_worker)
    # ChainerMN's first update only broadcasts the parameters of rank 0.
    optimizer.update(model, x[mine], t[mine])
    optimizer.update(model, x[mine], t[mine])  # multi-node mean gradient

worst = max(
    numpy.linalg.norm(p.grad - single[n]) / numpy.linalg.norm(single[n])
    for n, p in model.namedparams() if numpy.linalg.norm(single[n]) > 0)
print('rank', comm.rank, 'worst relative error', worst)
assert worst < 1e-6, worst
