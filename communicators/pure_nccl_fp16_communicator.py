"""GPU communicator whose gradient all-reduce is an NCCL float16 sum.

ChainerMN's own ``pure_nccl`` with ``allreduce_grad_dtype=float16`` casts
first and divides by the number of workers after the sum, so a sum of large
gradients can overflow float16. This one scales each parameter's gradient
by the power of two of :mod:`half_precision.scaling` (from an NCCL MAX
all-reduce of each parameter's largest magnitude), packs and casts every
gradient in one kernel, sums in float16 with NCCL, counts non-finite
elements, and unpacks multiplying by ``1 / (s p)`` in one kernel: the
kernels of :mod:`half_precision.segmented`, over a table of the gradients,
so the launches per update do not grow with the number of parameters.
"""
import chainer
import numpy

from chainermn.communicators.pure_nccl_communicator import \
    PureNcclCommunicator

from communicators.gradients import named_gradients
from communicators.initial_broadcast import broadcast_by_dtype
from communicators.initial_broadcast import nccl_broadcast
from largebatch.errors import NonFiniteGradientError
from half_precision import scaling
from half_precision import segmented

_FLOAT16 = numpy.dtype(numpy.float16)


class PureNcclFp16Communicator(PureNcclCommunicator):
    """ChainerMN's ``pure_nccl`` with a scaled float16 gradient mean.

    Raises :class:`~largebatch.errors.NonFiniteGradientError` from
    ``multi_node_mean_grad`` on every worker alike when the sum holds inf
    or NaN. The check reads one number back from the GPU per update.
    """

    def __init__(self, mpi_comm):
        super(PureNcclFp16Communicator, self).__init__(mpi_comm)
        self.set_config('allreduce_grad_dtype', _FLOAT16)

    def bcast_data(self, model):
        """Rank 0's parameters to every worker, each dtype's in its own
        (ChainerMN's sends all in ``chainer.get_dtype()``)."""
        broadcast_by_dtype([param for _, param in sorted(
            model.namedparams())], nccl_broadcast(self))

    def _multi_node_mean_grad_async(self, model, zero_fill, stream):
        # ChainerMN's chainermn.nccl re-exports only part of CuPy's names
        # (no NCCL_MAX); CuPy's module has them all.
        from cupy.cuda import nccl
        self._init_comms()
        named = named_gradients(model, zero_fill)
        grads = [param.grad for _, param in named]
        n = sum(g.size for g in grads)
        if n == 0:
            return
        self.gpu_buffer_b.assign(n * _FLOAT16.itemsize)
        half = self.gpu_buffer_b.array(n, dtype=_FLOAT16)
        with stream:
            peaks = segmented.max_abs(grads)
            self.nccl_comm.allReduce(segmented.address(peaks),
                                     segmented.address(peaks), peaks.size,
                                     nccl.NCCL_FLOAT32, nccl.NCCL_MAX,
                                     stream.ptr)
            scales = scaling.scales(peaks, self.size)
            inverses = scaling.inverses(scales, self.size)
            segmented.scale_pack(grads, scales, half)
            self.nccl_comm.allReduce(segmented.address(half),
                                     segmented.address(half), n,
                                     nccl.NCCL_FLOAT16, nccl.NCCL_SUM,
                                     stream.ptr)
            count = segmented.count_non_finite(half)
        stream.synchronize()
        count = int(count)
        if count:
            xp = chainer.backend.get_array_module(half)
            first = int(xp.argmax(~xp.isfinite(half)))
            raise NonFiniteGradientError.at(count, first, named)
        with stream:
            segmented.unpack(half, inverses, grads)
