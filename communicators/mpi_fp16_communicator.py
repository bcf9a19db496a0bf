"""CPU communicator whose gradient all-reduce moves float16 over MPI."""
from mpi4py import MPI
import numpy

from chainermn.communicators.naive_communicator import NaiveCommunicator

from communicators.gradients import named_gradients
from communicators.ring_allreduce import HalfPrecisionRingAllreduce
from largebatch.errors import NonFiniteGradientError
from half_precision import scaling
from half_precision.conversion import to_float
from half_precision.conversion import to_float_scaled

# A float16 is inf or NaN exactly when its magnitude bits reach 0x7c00:
# read as int16 the positive ones are the largest words, read as uint16 the
# negative ones (from 0xfc00 on).
_FP16_MAGNITUDE = numpy.uint16(0x7fff)
_FP16_INF = numpy.uint16(0x7c00)
_FP16_MINUS_INF = numpy.uint16(0xfc00)


class MpiFp16Communicator(NaiveCommunicator):
    """ChainerMN's ``naive`` communicator with a float16 gradient mean.

    ``multi_node_mean_grad`` takes each parameter's largest gradient
    magnitude over the workers (one MAX all-reduce of a float32 per
    parameter), packs every gradient (float32, or float16 under
    ``chainer.mixed16``) into one float32 buffer multiplied by its
    parameter's power-of-two scale ``s`` (:mod:`half_precision.scaling`:
    the sum fills float16's range and cannot overflow), sums it with
    float16 on the wire and float32 accumulation, checks the sum, and
    unpacks it multiplied by ``1 / (s p)``. Every other method is
    ChainerMN's.
    """

    def __init__(self, mpi_comm):
        super(MpiFp16Communicator, self).__init__(mpi_comm)
        self.ring = HalfPrecisionRingAllreduce(mpi_comm)
        self._packed = numpy.empty(0, numpy.float32)

    def multi_node_mean_grad(self, model, zero_fill=False):
        """Average the gradients of ``model`` over all workers.

        Raises:
            NonFiniteGradientError: on every worker alike, when the sum
                holds inf or NaN (only a non-finite gradient makes it so);
                the gradients are then left as they were.
        """
        named = named_gradients(model, zero_fill)
        for name, param in named:
            if not isinstance(param.grad, numpy.ndarray):
                raise TypeError(
                    'communicator mpi_fp16 averages CPU (NumPy) gradients; '
                    '{} is {} (use pure_nccl_fp16 on GPUs)'
                    .format(name, type(param.grad).__name__))
        peaks = scaling.maxima([param.grad for _, param in named])
        self.mpi_comm.Allreduce(MPI.IN_PLACE, peaks, op=MPI.MAX)
        scales = scaling.scales(peaks, self.size)
        inverses = scaling.inverses(scales, self.size)
        n = sum(param.grad.size for _, param in named)
        if self._packed.size < n:
            self._packed = numpy.empty(n, numpy.float32)
        packed = self._packed[:n]
        offset = 0
        for (_, param), scale in zip(named, scales):
            g = param.grad
            part = packed[offset:offset + g.size].reshape(g.shape)
            if g.dtype == numpy.float16:
                to_float(g, part)
                part *= scale
            else:
                numpy.multiply(g, scale, out=part)
            offset += g.size
        total = self.ring(packed)
        # Finite scaled gradients cannot sum to inf or NaN; otherwise two
        # vectorized maxima of the 16-bit words (NumPy's float16 isfinite is
        # scalar) and, only when one is non-finite, the count.
        bits = total.view(numpy.uint16)
        if n and not scaling.finite_by_construction(
                peaks, scales, self.size) and (
                bits.view(numpy.int16).max() >= _FP16_INF
                or bits.max() >= _FP16_MINUS_INF):
            bad = (bits & _FP16_MAGNITUDE) >= _FP16_INF
            raise NonFiniteGradientError.at(
                int(numpy.count_nonzero(bad)), int(numpy.argmax(bad)), named)
        offset = 0
        for (_, param), inverse in zip(named, inverses):
            g = param.grad
            part = total[offset:offset + g.size].reshape(g.shape)
            if g.dtype == numpy.float16:
                g[...] = numpy.multiply(part, inverse, dtype=numpy.float32)
            else:
                to_float_scaled(part, g, inverse)
            offset += g.size
