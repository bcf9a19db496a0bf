"""A ``chainer.mixed16`` network behind float32 ends.

Under ``chainer.global_config.dtype = chainer.mixed16`` Chainer's links make
their weights float16 (normalization parameters and statistics float32), so
the network takes float16 inputs and returns float16 outputs. Micikevicius
et al. (2018) keep the softmax and the loss in float32: this link casts the
float32 images to float16 for ``network`` and its outputs back to float32,
so that ``L.Classifier``'s loss and accuracy and the gradient that starts
the backward pass are computed in float32, and every layer stores float16.
"""
import numpy

import chainer
import chainer.functions as F


class MixedPrecision(chainer.Chain):
    """``network`` run on float16 inputs, returning float32 outputs.

    Args:
        network (~chainer.Link): a model built under ``chainer.mixed16``.
    """

    def __init__(self, network):
        super(MixedPrecision, self).__init__()
        with self.init_scope():
            self.network = network

    def forward(self, x):
        return F.cast(self.network(F.cast(x, numpy.float16)), numpy.float32)
