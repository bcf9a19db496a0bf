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

    ``multi_node_mean_grad`` packs every gradient (float32, or float16 under
    ``chainer.mixed16``) into one float32 buffer already divided by ``2 **
    k >= p``, the number of workers rounded up to a power of two (so that
    no partial sum of gradients below 65504 can exceed float16's range, and
    so that the division is exact: a float16 gradient reaches the wire with
    the bits it left the backward pass with), all-reduces it with float16
    on the wire and float32 accumulation, multiplying each complete sum by
    ``2 ** k / p`` before its one rounding to float16, checks the mean and
    unpacks it (a float16 gradient takes the mean's bits as they are).
    Every other method is ChainerMN's.
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
        k = (self.size - 1).bit_length()
        offset = 0
        for _, param in named:
            g = param.grad
            part = packed[offset:offset + g.size].reshape(g.shape)
            if g.dtype == numpy.float16:
                to_float(g, part)
                part *= numpy.float32(2. ** -k)
            else:
                numpy.multiply(g, numpy.float32(2. ** -k), out=part)
            offset += g.size
        mean = self.ring(packed, None if 2 ** k == self.size
                         else numpy.float32(2. ** k / self.size))
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
            part = mean[offset:offset + g.size].reshape(g.shape)
            if g.dtype == numpy.float16:
                g[...] = part
            else:
                to_float(part, g)
            offset += g.size
