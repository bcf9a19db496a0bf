"""ResNet-50 (width 0.25) forward and backward on a GPU, against the CPU."""
import copy

import chainer
import chainer.functions as F
import numpy

import gpu_marks
from models import MixedPrecision
from models import ResNet50

pytestmark = gpu_marks.GPU


def forward_backward(model, device, x, t):
    model = copy.deepcopy(model)
    model.to_device(device)
    loss = F.softmax_cross_entropy(model(device.send(x)), device.send(t))
    model.cleargrads()
    loss.backward()
    cpu = chainer.backend.CpuDevice()
    return (float(loss.array),
            {name: cpu.send(p.grad) for name, p in model.namedparams()})


def test_loss_and_gradients_match_the_cpu():
    # cuDNN may run float32 convolutions in TF32 on Ampere and later GPUs:
    # the gradients are compared by direction and size, not element-wise.
    rng = numpy.random.RandomState(0)
    model = ResNet50(10, width=0.25)
    x = rng.standard_normal((8, 3, 64, 64)).astype(numpy.float32)
    t = rng.randint(0, 10, 8).astype(numpy.int32)
    gpu_loss, gpu = forward_backward(model, chainer.get_device('@cupy:0'),
                                     x, t)
    cpu_loss, cpu = forward_backward(model, chainer.get_device('@numpy'),
                                     x, t)
    assert abs(gpu_loss - cpu_loss) <= 1e-2 * abs(cpu_loss)
    assert set(gpu) == set(cpu) and len(cpu) == 161
    for name, g in cpu.items():
        a, b = gpu[name].ravel().astype(numpy.float64), g.ravel()
        norm = numpy.linalg.norm(b)
        if norm == 0:
            assert numpy.linalg.norm(a) <= 1e-6, name
            continue
        cosine = a.dot(b) / (numpy.linalg.norm(a) * norm)
        assert cosine > 0.99, (name, cosine)
        assert abs(numpy.linalg.norm(a) / norm - 1) < 0.05, name


def test_mixed16_loss_and_gradients_follow_float32():
    # --dtype mixed16 on the GPU: float16 weights, activations and
    # gradients through cuDNN, against the float32 model on the CPU with the
    # same initial weights (float16 rounding: compared by direction).
    rng = numpy.random.RandomState(1)
    with chainer.using_config('dtype', chainer.mixed16):
        half = MixedPrecision(ResNet50(10, width=0.25))
    full = ResNet50(10, width=0.25)
    weights = dict(half.network.namedparams())
    for name, param in full.namedparams():
        param.array[...] = weights[name].array.astype(param.dtype)
    x = rng.standard_normal((8, 3, 64, 64)).astype(numpy.float32)
    t = rng.randint(0, 10, 8).astype(numpy.int32)
    with chainer.using_config('dtype', chainer.mixed16):
        gpu_loss, gpu = forward_backward(half, chainer.get_device('@cupy:0'),
                                         x, t)
    cpu_loss, cpu = forward_backward(full, chainer.get_device('@numpy'), x, t)
    assert abs(gpu_loss - cpu_loss) <= 5e-2 * abs(cpu_loss)
    assert set(gpu) == {'/network' + name for name in cpu}
    for name, g in cpu.items():
        a = gpu['/network' + name].ravel().astype(numpy.float64)
        b = g.ravel().astype(numpy.float64)
        assert numpy.isfinite(a).all(), name
        if numpy.linalg.norm(b) > 1e-3:
            cosine = a.dot(b) / (numpy.linalg.norm(a) * numpy.linalg.norm(b))
            assert cosine > 0.9, (name, cosine)
