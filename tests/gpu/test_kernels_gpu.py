"""Every CUDA kernel of the project run once on a GPU, on small float16 and
float32 arrays, against the CPU path (tests/gpu_offline checks the same
code without a GPU). Every kernel is compiled without FMA: the segmented
kernels and the float32 update (RMSprop warm-up, weight decay) match bit
for bit; the final-batch statistics' fold agrees within a float32 rounding,
as its inputs come from Chainer's batch normalization, which differs on a
GPU, and the float16 update within float16's."""
import os
import sys

import chainer
import numpy
import pytest

import gpu_marks

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'gpu_offline'))
from test_segmented_kernels import gradients  # NOQA: E402
from test_segmented_kernels import packed_on_cpu  # NOQA: E402

from half_precision import scaling  # NOQA: E402
from half_precision import segmented  # NOQA: E402
from models import FinalBatchNormalization  # NOQA: E402
from optimizers.rmsprop_warmup import RMSpropWarmupRule  # NOQA: E402
from optimizers.weight_decay import WeightDecay  # NOQA: E402

pytestmark = gpu_marks.GPU


@pytest.fixture
def cupy():
    import cupy
    return cupy


def test_segmented_kernels_are_the_cpu_path(cupy):
    arrays = gradients(5)
    arrays[3].flat[2] = numpy.inf
    on_gpu = [cupy.asarray(a) for a in arrays]
    peaks = scaling.maxima(arrays)
    numpy.testing.assert_array_equal(segmented.max_abs(on_gpu).get(), peaks)
    arrays[3].flat[2] = on_gpu[3].flat[2] = 0
    peaks = scaling.maxima(arrays)
    scales = scaling.scales(peaks, 2)
    inverses = scaling.inverses(scales, 2)
    packed = cupy.empty(sum(a.size for a in arrays), numpy.float16)
    segmented.scale_pack(on_gpu, cupy.asarray(scales), packed)
    want = packed_on_cpu(arrays, scales)
    numpy.testing.assert_array_equal(packed.get(), want)
    assert int(segmented.count_non_finite(packed)) == 0
    segmented.unpack(packed, cupy.asarray(inverses), on_gpu)
    for got, a, inv, start, end in zip(
            on_gpu, arrays, inverses, segmented.offsets(arrays)[:-1],
            segmented.offsets(arrays)[1:]):
        expected = (want[start:end].astype(numpy.float32) * inv).astype(
            a.dtype).reshape(a.shape)
        numpy.testing.assert_array_equal(got.get(), expected)


def test_round_and_accumulate_are_the_cpu_path(cupy):
    arrays = gradients(6)
    on_gpu = [cupy.asarray(a) for a in arrays]
    scaling.round_as_worker(arrays, 64)
    scaling.round_as_worker(on_gpu, 64)
    for got, want in zip(on_gpu, arrays):
        numpy.testing.assert_array_equal(got.get(), want)
    sums = [cupy.ones(a.shape, numpy.float32) for a in arrays]
    segmented.accumulate(on_gpu, sums)
    for got, a in zip(sums, arrays):
        numpy.testing.assert_array_equal(got.get(),
                                         1 + a.astype(numpy.float32))


def test_final_batch_statistics_fold_as_on_the_cpu(cupy):
    x = numpy.random.RandomState(7).randn(6, 5, 3, 3).astype(numpy.float32)
    links = [FinalBatchNormalization(5, micro_batches=2) for _ in range(2)]
    links[1].to_device('@cupy:0')
    for link in links:
        for part in (x[:3], x[3:]):
            link(link.xp.asarray(part))
    for got, want in zip(links[1].kept_statistics,
                         links[0].kept_statistics):
        numpy.testing.assert_allclose(cupy.asnumpy(got), want, rtol=1e-6,
                                      atol=1e-7)


@pytest.mark.parametrize('dtype', [numpy.float32, numpy.float16])
def test_rmsprop_warmup_and_weight_decay_as_on_the_cpu(cupy, dtype):
    rng = numpy.random.RandomState(8)
    w = rng.randn(300).astype(dtype)
    g = rng.randn(300).astype(dtype)
    results = []
    for xp in (numpy, cupy):
        param = chainer.Parameter(xp.asarray(w))
        param.grad = xp.asarray(g)
        rule = RMSpropWarmupRule(lr=0.1, alpha_sgd=0.5, alpha_rmsprop=0.3,
                                 eps=1e-3)
        rule.add_hook(WeightDecay(1e-2))
        rule.update(param)
        results.append(chainer.backend.CpuDevice().send(param.array))
    if dtype == numpy.float32:
        numpy.testing.assert_array_equal(results[1], results[0])
    else:
        numpy.testing.assert_allclose(results[1], results[0], rtol=2e-3,
                                      atol=2e-3)
