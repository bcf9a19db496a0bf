"""FinalBatchNormalization and its sync on a GPU, against the CPU."""
import chainer
import numpy

from extensions.final_batch_statistics import sync_final_batch_statistics
import gpu_marks
from models import FinalBatchNormalization

pytestmark = gpu_marks.GPU


class TwoWorkers(object):
    """A communicator whose other worker holds ``other`` (host arrays)."""

    size = 2

    def __init__(self, other):
        self.other = other

    def allreduce(self, host):
        return host + self.other


def to_cpu(a):
    return chainer.backend.CpuDevice().send(a)


def run(device):
    """Outputs, gradients and kept statistics of one link on ``device``."""
    rng = numpy.random.RandomState(0)
    x = (rng.standard_normal((8, 6, 5, 5)) * 3 + 1).astype(numpy.float32)
    gy = rng.standard_normal(x.shape).astype(numpy.float32)
    other = rng.standard_normal(3 * 6)
    model = chainer.Chain()
    with model.init_scope():
        model.bn = FinalBatchNormalization(6, variance='union',
                                           micro_batches=2)
    model.to_device(device)
    results = []
    for _ in range(2):  # one window of two micro-batches
        xv = chainer.Variable(device.send(x))
        y = model.bn(xv)
        y.grad = device.send(gy)
        y.backward()
        results += [y.array, xv.grad]
        x = x[::-1] * 0.5
    results += [model.bn.gamma.grad, model.bn.beta.grad]
    results += list(model.bn.kept_statistics)
    with chainer.using_config('train', False):
        results.append(model.bn(device.send(x)).array)
    assert sync_final_batch_statistics(model, TwoWorkers(other)) == 1
    results += list(model.bn.kept_statistics)
    return [to_cpu(a) for a in results]


def test_forward_backward_and_sync_match_the_cpu():
    gpu = run(chainer.get_device('@cupy:0'))
    cpu = run(chainer.get_device('@numpy'))
    assert len(gpu) == len(cpu) == 13
    for a, b in zip(gpu, cpu):
        numpy.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
