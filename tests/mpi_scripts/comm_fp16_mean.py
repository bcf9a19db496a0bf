"""The mpi_fp16 communicator on N workers: accuracy, range, non-finite check.

Prints ``ok <check>`` for each check that passed on this rank.
"""
import chainer
import chainermn
from chainermn.communicators.naive_communicator import NaiveCommunicator
import numpy

import errors
import communicators
from communicators.mpi_fp16_communicator import MpiFp16Communicator

chainermn.global_except_hook.add_hook()  # a failed check aborts every rank
comm = communicators.create_communicator('mpi_fp16')
rank, size = comm.rank, comm.size


class Grads(chainer.Chain):
    """Parameters '/a' (n,), '/b' (2, 3) and '/c/W' (3,) with given grads."""

    def __init__(self, n):
        super(Grads, self).__init__()
        with self.init_scope():
            self.a = chainer.Parameter(numpy.zeros(n, numpy.float32))
            self.b = chainer.Parameter(numpy.zeros((2, 3), numpy.float32))
            self.c = chainer.Link()
            with self.c.init_scope():
                self.c.W = chainer.Parameter(numpy.zeros(3, numpy.float32))

    def set_grads(self, value):
        for _, param in sorted(self.namedparams()):
            param.grad = numpy.full(param.shape, value, numpy.float32)


def all_same(array):
    return all(numpy.array_equal(array, other)
               for other in comm.mpi_comm.allgather(array))


def check_mean_within_fp16_rounding():
    for n in sorted({1, size - 1, size + 1, 7, 1001}):
        if n < 1:
            continue
        model = Grads(n)
        rng = numpy.random.RandomState(10 * n + rank)
        for _, param in model.namedparams():
            param.grad = (rng.standard_normal(param.shape)
                          * 10. ** rng.randint(-4, 3, param.shape)
                          ).astype(numpy.float32)
        grads = comm.mpi_comm.allgather(
            {name: p.grad.copy() for name, p in model.namedparams()})
        comm.multi_node_mean_grad(model)
        for name, param in model.namedparams():
            stack = numpy.stack([g[name] for g in grads]).astype(numpy.float64)
            # Each of the <= size + 1 roundings to float16 of a partial sum
            # of the scaled gradients errs by <= 2^-11 of it (+ 2^-25 below
            # float16's normal range).
            bound = (2. ** -11 * numpy.abs(stack).sum(0)
                     + (size + 1) * 2. ** -24)
            error = numpy.abs(param.grad - stack.mean(0))
            assert (error <= bound).all(), (n, name, (error / bound).max())
            assert param.grad.dtype == numpy.float32
            assert all_same(param.grad), (n, name)
    print('ok mean')


def check_large_gradients_stay_finite():
    model = Grads(5)
    model.set_grads(4e4)  # float16 max 65504: a sum before dividing overflows
    comm.multi_node_mean_grad(model)
    for _, param in model.namedparams():
        assert (param.grad == 4e4).all(), param.grad
    print('ok large')


def check_non_finite_detected_everywhere(bad_value):
    model = Grads(4)
    model.set_grads(1.)
    if rank == size - 1:
        model.b.grad[1, 2] = bad_value
        model.c.W.grad[0] = bad_value
    before = {name: p.grad.copy() for name, p in model.namedparams()}
    try:
        comm.multi_node_mean_grad(model)
    except errors.NonFiniteGradientError as e:
        assert isinstance(e, RuntimeError)
        assert (e.count, e.param_name) == (2, '/b'), str(e)
        assert '\n' not in str(e) and '/b' in str(e)
    else:
        raise AssertionError('non-finite mean not detected')
    for name, param in model.namedparams():
        numpy.testing.assert_array_equal(param.grad, before[name])
    print('ok non-finite {}'.format(bad_value))


def check_optimizer_skips_update():
    model = Grads(3)
    optimizer = chainermn.create_multi_node_optimizer(
        chainer.optimizers.SGD(lr=1.), comm)
    optimizer.setup(model)
    model.set_grads(0.5)
    optimizer.update()  # the first call only broadcasts the parameters
    model.set_grads(0.5)
    optimizer.update()
    assert (model.a.array == -0.5).all(), model.a.array
    model.set_grads(numpy.nan if rank == 0 else 0.5)
    try:
        optimizer.update()
    except errors.NonFiniteGradientError:
        pass
    else:
        raise AssertionError('update with a NaN mean was applied')
    assert (model.a.array == -0.5).all(), model.a.array
    print('ok optimizer')


def check_zero_fill():
    model = Grads(2)
    model.set_grads(2.)
    model.c.W.grad = None
    comm.multi_node_mean_grad(model, zero_fill=True)
    assert (model.c.W.grad == 0).all() and (model.a.grad == 2).all()
    model.c.W.grad = None
    comm.multi_node_mean_grad(model)
    assert model.c.W.grad is None
    print('ok zero_fill')


def check_chainermn_api():
    assert isinstance(comm, NaiveCommunicator)
    assert type(comm.split(rank % 2, rank)) is type(comm)
    model = Grads(2)
    model.a.array[...] = rank + 1
    comm.bcast_data(model)
    assert (model.a.array == 1).all()
    assert comm.allreduce_obj(1) == size
    assert comm.bcast_obj('root' if rank == 0 else None) == 'root'
    shard = chainermn.scatter_dataset(list(range(2 * size)), comm)
    assert len(shard) == 2
    print('ok api')


def check_factory():
    make = communicators.create_communicator
    assert type(make('naive', 'float16')) is MpiFp16Communicator
    assert type(make('mpi_fp16')) is MpiFp16Communicator
    assert type(make('naive')) is NaiveCommunicator
    try:
        make('flat', 'float16')
    except ValueError as e:
        assert 'flat' in str(e) and '\n' not in str(e)
    else:
        raise AssertionError('flat accepted float16')
    print('ok factory')


check_mean_within_fp16_rounding()
check_large_gradients_stay_finite()
check_non_finite_detected_everywhere(numpy.nan)
check_non_finite_detected_everywhere(numpy.inf)
check_optimizer_skips_update()
check_zero_fill()
check_chainermn_api()
check_factory()
