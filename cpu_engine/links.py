"""Drop-in Chainer links whose NumPy computations use the CPU fast paths.

Parameters, persistent values and their names are those of the Chainer
links they extend, so models and snapshots do not change; on CuPy (cuDNN)
and ChainerX arrays they compute exactly as the Chainer links do.
"""
import chainer
import chainer.links as L

from cpu_engine.batch_normalization import batch_normalization
from cpu_engine.convolution_2d import convolution_2d
from cpu_engine.relu import relu as relu_function


class Convolution2D(L.Convolution2D):
    """:class:`chainer.links.Convolution2D` using :func:`convolution_2d`."""

    def forward(self, x):
        if self.x_layout is not None:
            return super(Convolution2D, self).forward(x)
        if self.W.raw_array is None:
            self._initialize_params(x.shape[1])
        return convolution_2d(
            x, self.W, self.b, self.stride, self.pad, dilate=self.dilate,
            groups=self.groups, cudnn_fast=self.cudnn_fast)


class BatchNormalization(L.BatchNormalization):
    """:class:`chainer.links.BatchNormalization` using
    :func:`batch_normalization` for training-mode batches.

    Test mode, fine-tuning and recomputation keep Chainer's code. Called
    with ``relu=True`` it returns ``relu`` of its output, in the same
    passes over memory for training-mode batches; ``relu`` is keyword-only,
    as Chainer's link takes nothing but ``x`` by position.
    """

    def forward(self, x, *, relu=False, **kwargs):
        if (set(kwargs) - {'finetune'} or kwargs.get('finetune')
                or not chainer.config.train
                or chainer.config.in_recomputing or self.avg_mean is None
                or self.gamma is None or self.beta is None):
            y = super(BatchNormalization, self).forward(x, **kwargs)
            return relu_function(y) if relu else y
        return batch_normalization(
            x, self.gamma, self.beta, eps=self.eps,
            running_mean=self.avg_mean, running_var=self.avg_var,
            decay=self.decay, axis=self.axis, relu=relu)
