"""The pure_nccl_fp16 communicator, one GPU per worker.

Prints ``ok <check>`` for each check that passed on this rank.
"""
import chainer
import chainermn
import numpy

import errors
import communicators
from communicators.pure_nccl_fp16_communicator import \
    PureNcclFp16Communicator

chainermn.global_except_hook.add_hook()  # a failed check aborts every rank
comm = communicators.create_communicator('pure_nccl', 'float16')
assert type(comm) is PureNcclFp16Communicator
device = chainer.get_device('@cupy:{}'.format(comm.intra_rank))
device.use()
cupy = device.xp


def model_with_grads(values):
    link = chainer.Link()
    with link.init_scope():
        link.a = chainer.Parameter(numpy.zeros(len(values), numpy.float32))
        link.b = chainer.Parameter(numpy.zeros(3, numpy.float32))
    link.to_device(device)
    link.a.grad = cupy.asarray(values, dtype=numpy.float32)
    link.b.grad = cupy.ones(3, dtype=numpy.float32)
    return link


rng = numpy.random.RandomState(comm.rank)
values = rng.standard_normal(1001).astype(numpy.float32)
grads = numpy.stack(comm.mpi_comm.allgather(values))
model = model_with_grads(values)
comm.multi_node_mean_grad(model)
bound = 2. ** -11 * numpy.abs(grads).sum(0) + (comm.size + 1) * 2. ** -24
error = numpy.abs(cupy.asnumpy(model.a.grad) - grads.mean(0))
assert (error <= bound).all(), (error / bound).max()
assert (cupy.asnumpy(model.b.grad) == 1).all()
print('ok mean')

model = model_with_grads(numpy.full(5, 4e4))
comm.multi_node_mean_grad(model)
assert (cupy.asnumpy(model.a.grad) == 4e4).all()
print('ok large')

bad = numpy.ones(5)
if comm.rank == comm.size - 1:
    bad[3] = numpy.nan
model = model_with_grads(bad)
try:
    comm.multi_node_mean_grad(model)
except errors.NonFiniteGradientError as e:
    assert (e.count, e.param_name) == (1, '/a'), str(e)
else:
    raise AssertionError('non-finite mean not detected')
print('ok non-finite')
