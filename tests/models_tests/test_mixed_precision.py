"""A ResNet-50 built under chainer.mixed16, behind MixedPrecision."""
import functools

import chainer
import numpy

import cpu_engine
import models
from models.mixed_precision import MixedPrecision


def test_float16_weights_float32_normalization_and_ends():
    with chainer.using_config('dtype', chainer.mixed16):
        for norm in (functools.partial(
                models.FinalBatchNormalization,
                batch_normalization=cpu_engine.batch_normalization),
                cpu_engine.BatchNormalization):
            net = models.ResNet50(10, norm=norm, layers=cpu_engine,
                                  width=0.125)
            model = MixedPrecision(net)
            assert net.conv1.W.dtype == net.fc.W.dtype == numpy.float16
            assert net.bn1.gamma.dtype == net.bn1.beta.dtype == numpy.float32
            stats = (net.bn1.kept_statistics
                     if hasattr(net.bn1, 'kept_statistics')
                     else (net.bn1.avg_mean, net.bn1.avg_var))
            assert all(s.dtype == numpy.float32 for s in stats)
            x = numpy.random.RandomState(0).randn(2, 3, 32, 32).astype(
                numpy.float32)
            y = model(x)
            assert y.dtype == numpy.float32 and y.shape == (2, 10)
            assert numpy.isfinite(y.array).all()
            assert all(s.dtype == numpy.float32 for s in stats)
            with chainer.using_config('train', False):
                assert model(x).dtype == numpy.float32
