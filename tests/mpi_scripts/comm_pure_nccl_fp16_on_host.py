"""The pure_nccl_fp16 communicator's own code on CPU workers, with no GPU.

``PureNcclFp16Communicator`` runs as written on NumPy gradients; only what
needs a GPU stands in: NCCL's ``allReduce`` and ``bcast`` (over MPI, on host
addresses), CuPy's null stream and ChainerMN's device buffer (host memory),
and the segmented kernels, compiled as C++ (tests/gpu_offline/
host_kernels.py) into ``sys.argv[1]``. Checks the float16 communicators'
contract (fp16_contract.py), then that the mean is, bit for bit, NumPy's
sum of the scaled float16 gradients in rank order times ``1 / (s p)``.

Prints ``ok <check>`` for each check that passed on this rank. Needs CuPy
(its NCCL constants and ChainerMN's NCCL communicator import it).
"""
import ctypes
import os
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
from chainer.backends import cuda
import chainermn
from cupy.cuda import nccl
import numpy

import communicators
from communicators.pure_nccl_fp16_communicator import \
    PureNcclFp16Communicator
import fp16_contract
from half_precision import scaling
from half_precision import segmented

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'gpu_offline'))
from host_kernels import HostKernels  # NOQA: E402

DTYPES = {nccl.NCCL_FLOAT16: numpy.float16, nccl.NCCL_FLOAT32: numpy.float32,
          nccl.NCCL_FLOAT64: numpy.float64}
OPS = {nccl.NCCL_SUM: numpy.add, nccl.NCCL_MAX: numpy.maximum}


def host_view(address, count, datatype):
    """The ``count`` elements of NCCL type ``datatype`` at a host address."""
    dtype = numpy.dtype(DTYPES[datatype])
    return numpy.frombuffer((ctypes.c_char * (count * dtype.itemsize))
                            .from_address(address), dtype, count)


class HostNccl(object):
    """NCCL's ``allReduce`` and ``bcast`` on host addresses, over MPI. A
    reduction adds the ranks' arrays in rank order in their own dtype, so
    each partial sum is rounded, as NCCL's reductions round them."""

    def __init__(self, mpi_comm):
        self.mpi_comm = mpi_comm

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):
        every = self.mpi_comm.allgather(
            host_view(sendbuf, count, datatype).copy())
        result = every[0]
        for other in every[1:]:
            result = OPS[op](result, other)
        host_view(recvbuf, count, datatype)[...] = result

    def bcast(self, buff, count, datatype, root, stream):
        view = host_view(buff, count, datatype)
        view[...] = self.mpi_comm.bcast(
            view.copy() if self.mpi_comm.rank == root else None, root)


class HostStream(object):
    """CuPy's null stream: host code runs in order."""
    ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


class HostMemory(object):
    """ChainerMN's ``DeviceMemory`` in host memory."""

    def __init__(self):
        self.memory = numpy.empty(0, numpy.uint8)

    def assign(self, size):
        if size > self.memory.size:
            self.memory = numpy.empty(size, numpy.uint8)

    def array(self, count, dtype):
        return self.memory[:count * numpy.dtype(dtype).itemsize].view(dtype)


class _Streams(object):
    null = HostStream()


def exact_mean(comm):
    """The mean is NumPy's, bit for bit: the largest magnitude over the
    workers gives ``s``; each worker's ``g s`` rounded to float16, summed in
    rank order in float16, times ``1 / (s p)``, rounded to the dtype."""
    rng = numpy.random.RandomState(comm.rank)
    for dtype in (numpy.float32, numpy.float16):
        model = fp16_contract.Grads(segmented.THREADS * 3 + 5, dtype)
        for _, param in model.namedparams():
            param.grad = (rng.standard_normal(param.shape) * 10. **
                          rng.randint(-4, 3, param.shape)).astype(dtype)
        every = comm.mpi_comm.allgather(
            {name: p.grad.copy() for name, p in model.namedparams()})
        comm.multi_node_mean_grad(model)
        for name, param in model.namedparams():
            grads = [worker[name] for worker in every]
            peak = numpy.array([max(scaling.max_abs(g) for g in grads)],
                               numpy.float32)
            scale = scaling.scales(peak, comm.size)
            inverse = scaling.inverses(scale, comm.size)
            total = None
            for g in grads:
                half = (g.astype(numpy.float32) * scale).astype(numpy.float16)
                total = half if total is None else total + half
            want = (total.astype(numpy.float32) * inverse).astype(dtype)
            assert param.grad.dtype == dtype
            numpy.testing.assert_array_equal(param.grad, want, err_msg=name)
        print('ok exact {}'.format(numpy.dtype(dtype).name))


chainermn.global_except_hook.add_hook()  # a failed check aborts every rank
comm = communicators.create_communicator('pure_nccl', 'float16', gpu=True)
assert type(comm) is PureNcclFp16Communicator
comm.nccl_comm = HostNccl(comm.mpi_comm)
comm.gpu_buffer_b = HostMemory()
cuda.Stream = _Streams
folder = os.path.join(sys.argv[1], 'rank{}'.format(comm.rank))
os.makedirs(folder)
kernels = HostKernels(segmented.SOURCE, folder, segmented.THREADS)
segmented.launch = kernels.launch
fp16_contract.run(comm, chainer.get_device('@numpy'))
exact_mean(comm)
