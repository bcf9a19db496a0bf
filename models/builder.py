"""The trainer's network as one call: architecture, normalization, dtype,
zero-init and layer set, the classifier with its loss around it.

The trainer and the step benchmarks build the same model through it.
"""
import functools

import chainer
import chainer.links as L
import numpy

from models import chainer_layers
from models.final_batch_normalization import FinalBatchNormalization
from models.label_smoothing import label_smoothed_cross_entropy
from models.mixed_precision import MixedPrecision
from models.resnet50 import ResNet50
from models.resnet50 import zero_init_residual

#: The networks by ``--arch`` name.
ARCHS = {'resnet50': ResNet50}
#: How BN layers test: Akiba et al.'s final-batch statistics, or Chainer's
#: moving averages.
BN_STATS = ('final-batch', 'moving-average')


def build_classifier(n_class, arch='resnet50', width=1.0,
                     bn_stats='final-batch', bn_variance='mean',
                     micro_batches=1, dtype='float32',
                     zero_init=False, label_smoothing=0.0,
                     layers=chainer_layers):
    """``L.Classifier`` of network ``arch`` with ``n_class`` outputs.

    Args:
        width: channel-width multiplier (1: the network itself).
        bn_stats: one of :data:`BN_STATS`; final-batch BN keeps the
            statistics of ``micro_batches`` calls per update, read with
            ``bn_variance``.
        dtype: ``'float32'`` or ``'mixed16'`` (float16 weights behind
            :class:`MixedPrecision`'s float32 ends).
        zero_init: zero the last BN gamma of each residual block (Goyal et
            al.).
        label_smoothing: the loss's epsilon.
        layers: the layer set (:mod:`models.chainer_layers`, or the CPU
            engine's).
    """
    norm = layers.BatchNormalization
    if bn_stats == 'final-batch':
        norm = functools.partial(
            FinalBatchNormalization, variance=bn_variance,
            micro_batches=micro_batches,
            batch_normalization=layers.batch_normalization)
    mixed16 = dtype == 'mixed16'
    with chainer.using_config('dtype', chainer.mixed16 if mixed16
                              else numpy.float32):
        predictor = ARCHS[arch](n_class, norm=norm, layers=layers,
                                width=width)
    if zero_init:
        zero_init_residual(predictor)
    if mixed16:
        predictor = MixedPrecision(predictor)
    return L.Classifier(predictor, lossfun=functools.partial(
        label_smoothed_cross_entropy, eps=label_smoothing))
