"""Chainer's own links and functions: the layer set a model is built from.

A model takes its layers as one module-like value, ``layers``, with these
names. This module is the default and what GPU runs use (cuDNN through
Chainer's functions); :mod:`cpu_engine` has the same names with fast paths
for NumPy arrays.
"""
from chainer.functions import batch_normalization  # NOQA
from chainer.functions import max_pooling_2d  # NOQA
from chainer.functions import relu
from chainer.links import BatchNormalization  # NOQA
from chainer.links import Convolution2D  # NOQA


def add_relu(h, shortcut):
    """``relu(h + shortcut)``, the output of a residual block."""
    return relu(h + shortcut)
