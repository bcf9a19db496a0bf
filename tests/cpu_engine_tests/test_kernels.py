"""cpu_engine._kernels, the C loops: bad buffers raise, never corrupt."""
import numpy
import pytest

from cpu_engine import cpu_runtime

pytestmark = pytest.mark.skipif(cpu_runtime.kernels is None,
                                reason='cpu_engine._kernels is not built')


def _pooling(name, lengths, dtypes, stride=2):
    """A call of the C loop ``name`` on zero buffers of these lengths and
    dtypes, for a 2x2 window of stride ``stride`` over 2x2 planes."""
    arrays = [numpy.zeros(n, d) for n, d in zip(lengths, dtypes)]
    return lambda k: getattr(k, name)(*arrays, 2, 2, 1, 1, 2, 2, stride,
                                      stride, 0, 0)


@pytest.mark.parametrize('call, error, message', [
    (lambda k: k.rmsprop_warmup(*[numpy.zeros(4)] * 4, 1, .9, .99, 1e-8,
                                1, 0), TypeError, "float32, got format 'd'"),
    (lambda k: k.rmsprop_warmup(*[numpy.zeros((4, 2), numpy.float32).T] * 4,
                                1, .9, .99, 1e-8, 1, 0), ValueError,
     'contiguous'),
    (lambda k: k.rmsprop_warmup(*[numpy.zeros(4, numpy.float32)] * 3,
                                numpy.zeros(5, numpy.float32),
                                1, .9, .99, 1e-8, 1, 0), ValueError,
     'lengths'),
    (lambda k: k.weight_decay(numpy.zeros(4, numpy.float32),
                              numpy.zeros(5, numpy.float32), 0.1),
     ValueError, 'lengths'),
    (lambda k: k.weight_decay(numpy.zeros(4, numpy.float32)[::2],
                              numpy.zeros(2, numpy.float32), 0.1),
     ValueError, 'contiguous'),
    (lambda k: k.bn_forward(numpy.zeros(6, numpy.float32),
                            *[numpy.zeros(4, numpy.float32)] * 2, 1e-5,
                            *[numpy.zeros(4, numpy.float32)] * 4, False),
     ValueError, 'lengths'),
    (lambda k: k.bn_backward(*[numpy.zeros(6, numpy.float32)] * 2,
                             *[numpy.zeros(3, numpy.float32)] * 3,
                             numpy.zeros(6, numpy.float32),
                             *[numpy.zeros(3, numpy.float32)] * 2,
                             numpy.zeros(5, numpy.float32)),
     ValueError, 'lengths'),
    (lambda k: k.bn_backward(*[numpy.zeros(6, numpy.float32)] * 5,
                             numpy.zeros(6, numpy.float32)[::-1],
                             *[numpy.zeros(6, numpy.float32)] * 2),
     ValueError, 'contiguous'),
    (lambda k: k.relu(*[numpy.zeros(6, numpy.float32)] * 2,
                      numpy.zeros(5, numpy.float32)), ValueError, 'lengths'),
    (lambda k: k.add(*[numpy.zeros(6, numpy.float32)] * 2,
                     numpy.zeros(5, numpy.float32)), ValueError, 'lengths'),
    (lambda k: k.relu_grad(numpy.zeros(6, numpy.float32), numpy.zeros(6),
                           numpy.zeros(6, numpy.float32)), TypeError,
     'float32'),
    (_pooling('max_pool', (8, 2, 2, 4), 'fffB'), TypeError, 'uint8'),
    (_pooling('max_pool', (8, 2, 2, 4), 'ffBB', stride=0), ValueError,
     'window'),
    (_pooling('max_pool_grad', (3, 2, 4, 8), 'fBBf'), ValueError, 'lengths'),
])
def test_reject_bad_buffers(call, error, message):
    with pytest.raises(error, match=message):
        call(cpu_runtime.kernels)
