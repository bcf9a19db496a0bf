"""GPU communicator whose gradient all-reduce is an NCCL float16 sum.

ChainerMN's own ``pure_nccl`` with ``allreduce_grad_dtype=float16`` casts
first and divides by the number of workers after the sum, so a sum of large
gradients can overflow float16. This one packs the float32 gradients with
ChainerMN's kernels, scales by 1 / workers and casts in one fused kernel,
sums in float16 with NCCL, counts non-finite elements, and unpacks (casting
back to float32) with ChainerMN's kernels.
"""
import numpy

from chainer.backends import cuda
from chainermn.communicators.pure_nccl_communicator import \
    PureNcclCommunicator
from chainermn import nccl

from communicators.gradients import named_gradients
from errors import NonFiniteGradientError

_FLOAT32 = numpy.dtype(numpy.float32)
_FLOAT16 = numpy.dtype(numpy.float16)


def _scale_to_half():
    return cuda.elementwise(
        'float32 g, float32 scale', 'float16 h', 'h = g * scale',
        'scale_to_half')


def _count_non_finite():
    return cuda.reduce(
        'float16 h', 'int64 n', 'isfinite((float) h) ? 0 : 1', 'a + b',
        'n = a', '0', 'count_non_finite')


class PureNcclFp16Communicator(PureNcclCommunicator):
    """ChainerMN's ``pure_nccl`` with a scale-first float16 gradient mean.

    Raises :class:`~errors.NonFiniteGradientError` from
    ``multi_node_mean_grad`` on every worker alike when the mean holds inf
    or NaN. The check reads one number back from the GPU per update.
    """

    def __init__(self, mpi_comm):
        super(PureNcclFp16Communicator, self).__init__(mpi_comm)
        self.set_config('allreduce_grad_dtype', _FLOAT16)
        self.set_config('batched_copy', True)

    def _multi_node_mean_grad_async(self, model, zero_fill, stream):
        self._init_comms()
        named = named_gradients(model, zero_fill)
        params = [param for _, param in named]
        n = sum(param.grad.size for param in params)
        if n == 0:
            return
        self.gpu_buffer_a.assign(n * _FLOAT32.itemsize)
        self.gpu_buffer_b.assign(n * _FLOAT16.itemsize)
        self._pack_params_to_buffer(params, 'grad', self.gpu_buffer_a,
                                    _FLOAT32, zero_fill, stream)
        packed = self.gpu_buffer_a.array(n, dtype=_FLOAT32)
        half = self.gpu_buffer_b.array(n, dtype=_FLOAT16)
        with stream:
            _scale_to_half()(packed, numpy.float32(1. / self.size), half)
            self.nccl_comm.allReduce(half.data.ptr, half.data.ptr, n,
                                     nccl.NCCL_FLOAT16, nccl.NCCL_SUM,
                                     stream.ptr)
            count = _count_non_finite()(half)
        stream.synchronize()
        count = int(count)
        if count:
            first = int(cuda.cupy.argmax(~cuda.cupy.isfinite(half)))
            self.params_data = None
            raise NonFiniteGradientError.at(count, first, named)
        self._unpack_params_from_buffer(params, 'grad', self.gpu_buffer_b,
                                        _FLOAT16, zero_fill, stream)
