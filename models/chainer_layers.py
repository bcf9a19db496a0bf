"""Chainer's own links and functions: the layer set a model is built from.

A model takes its layers as one module-like value, ``layers``, with these
names. This module is the default and what GPU runs use (cuDNN through
Chainer's functions); :mod:`cpu_engine` has the same names with fast paths
for NumPy arrays. A layer set's normalization, link and function, takes
``relu=True`` to return ``relu`` of its output, so that a set can compute
the pair in one pass (here they are Chainer's two functions).
"""
import chainer.functions as F
from chainer.functions import max_pooling_2d  # NOQA
from chainer.functions import relu
import chainer.links as L
from chainer.links import Convolution2D  # NOQA


def batch_normalization(x, gamma, beta, relu=False, **kwargs):
    """``chainer.functions.batch_normalization``, then ``relu`` if asked."""
    y = F.batch_normalization(x, gamma, beta, **kwargs)
    return F.relu(y) if relu else y


class BatchNormalization(L.BatchNormalization):
    """``chainer.links.BatchNormalization``, then ``relu`` if asked."""

    def forward(self, x, relu=False, **kwargs):
        y = super(BatchNormalization, self).forward(x, **kwargs)
        return F.relu(y) if relu else y


def add_relu(h, shortcut):
    """``relu(h + shortcut)``, the output of a residual block."""
    return relu(h + shortcut)


def fork(x):
    """``(x, x)``, for two layers to read ``x``: a set can sum their
    gradients itself (here Chainer's backward loop does)."""
    return x, x
