"""The trainer's network as one call: architecture, normalization, dtype,
zero-init and layer set, the classifier with its loss around it.

The trainer and the step benchmarks build the same model through it.
"""
import dataclasses
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


@dataclasses.dataclass(frozen=True)
class ClassifierSpec:
    """What :func:`build_classifier` builds.

    Attributes:
        n_class: the outputs.
        arch: a name of :data:`ARCHS`.
        width: channel-width multiplier (1: the network itself).
        bn_stats: one of :data:`BN_STATS`; final-batch BN keeps the
            statistics of ``micro_batches`` calls per update, read with
            ``bn_variance``.
        dtype: ``'float32'`` or ``'mixed16'`` (float16 weights behind
            :class:`MixedPrecision`'s float32 ends).
        zero_init: zero the last BN gamma of each residual block (Goyal et
            al.).
        label_smoothing: the loss's epsilon.
    """
    n_class: int
    arch: str = 'resnet50'
    width: float = 1.0
    bn_stats: str = 'final-batch'
    bn_variance: str = 'mean'
    micro_batches: int = 1
    dtype: str = 'float32'
    zero_init: bool = False
    label_smoothing: float = 0.0


def build_classifier(spec, layers=chainer_layers):
    """``L.Classifier`` of the network ``spec`` (:class:`ClassifierSpec`)
    states, of ``layers`` (:mod:`models.chainer_layers`, or the CPU
    engine's)."""
    norm = layers.BatchNormalization
    if spec.bn_stats == 'final-batch':
        norm = functools.partial(
            FinalBatchNormalization, variance=spec.bn_variance,
            micro_batches=spec.micro_batches,
            batch_normalization=layers.batch_normalization)
    mixed16 = spec.dtype == 'mixed16'
    with chainer.using_config('dtype', chainer.mixed16 if mixed16
                              else numpy.float32):
        predictor = ARCHS[spec.arch](spec.n_class, norm=norm, layers=layers,
                                     width=spec.width)
    if spec.zero_init:
        zero_init_residual(predictor)
    if mixed16:
        predictor = MixedPrecision(predictor)
    return L.Classifier(predictor, lossfun=functools.partial(
        label_smoothed_cross_entropy, eps=spec.label_smoothing))
