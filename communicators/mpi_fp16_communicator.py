"""CPU communicator whose gradient all-reduce moves float16 over MPI."""
import numpy

from chainermn.communicators.naive_communicator import NaiveCommunicator

from communicators.gradients import named_gradients
from communicators.half_conversion import to_float
from errors import NonFiniteGradientError
from communicators.ring_allreduce import HalfPrecisionRingAllreduce

# A float16 is inf or NaN exactly when its magnitude bits reach 0x7c00:
# read as int16 the positive ones are the largest words, read as uint16 the
# negative ones (from 0xfc00 on).
_FP16_MAGNITUDE = numpy.uint16(0x7fff)
_FP16_INF = numpy.uint16(0x7c00)
_FP16_MINUS_INF = numpy.uint16(0xfc00)


class MpiFp16Communicator(NaiveCommunicator):
    """ChainerMN's ``naive`` communicator with a float16 gradient mean.

    ``multi_node_mean_grad`` packs every gradient into one float32 buffer
    already divided by the number of workers (so that no partial sum of
    gradients below 65504 can exceed float16's range), all-reduces it with
    float16 on the wire and float32 accumulation, checks the result and
    unpacks it. Every other method is ChainerMN's.
    """

    def __init__(self, mpi_comm):
        super(MpiFp16Communicator, self).__init__(mpi_comm)
        self.ring = HalfPrecisionRingAllreduce(mpi_comm)
        self._packed = numpy.empty(0, numpy.float32)

    def multi_node_mean_grad(self, model, zero_fill=False):
        """Average the gradients of ``model`` over all workers.

        Raises:
            NonFiniteGradientError: on every worker alike, when the mean
                holds inf or NaN; the gradients are then left as they were.
        """
        named = named_gradients(model, zero_fill)
        for name, param in named:
            if not isinstance(param.grad, numpy.ndarray):
                raise TypeError(
                    'communicator mpi_fp16 averages CPU (NumPy) gradients; '
                    '{} is {} (use pure_nccl_fp16 on GPUs)'
                    .format(name, type(param.grad).__name__))
        n = sum(param.grad.size for _, param in named)
        if self._packed.size < n:
            self._packed = numpy.empty(n, numpy.float32)
        packed = self._packed[:n]
        scale = numpy.float32(1. / self.size)
        offset = 0
        for _, param in named:
            g = param.grad
            numpy.multiply(g, scale,
                           out=packed[offset:offset + g.size].reshape(g.shape))
            offset += g.size
        mean = self.ring(packed)
        # Two vectorized maxima of the 16-bit words (NumPy's float16
        # isfinite is scalar); the mask is built only when one is non-finite.
        bits = mean.view(numpy.uint16)
        if n and (bits.view(numpy.int16).max() >= _FP16_INF
                  or bits.max() >= _FP16_MINUS_INF):
            bad = (bits & _FP16_MAGNITUDE) >= _FP16_INF
            raise NonFiniteGradientError.at(
                int(numpy.count_nonzero(bad)), int(numpy.argmax(bad)), named)
        offset = 0
        for _, param in named:
            g = param.grad
            to_float(mean[offset:offset + g.size].reshape(g.shape), g)
            offset += g.size
