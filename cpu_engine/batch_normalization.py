"""Training-mode batch normalization of NumPy activations in their layout.

Channel-major activations (:mod:`cpu_engine.channel_major`) hold each
channel in one contiguous row, so both passes read each row about once, in
C loops or in L2-sized blocks; float32 channels-last activations
(:mod:`cpu_engine.channels_last`) are normalized as the columns of an
(N H W, C) matrix by C loops and stay channels-last
(docs/cpu_performance.md). An ``impl_selector`` implementation of
Chainer's own ``BatchNormalization`` FunctionNode:

    forward:  mu = mean(x), var = mean((x - mu)^2),
              y = gamma (x - mu) / sqrt(var + eps) + beta
    backward: x_hat = (x - mu) / sqrt(var + eps),
              gbeta = sum(gy), ggamma = sum(gy x_hat),
              gx = gamma / sqrt(var + eps) (gy - (x_hat ggamma + gbeta) / m)

Under ``chainer.mixed16`` the activations are float16 and gamma, beta and
the statistics float32: such inputs are normalized in float32 and ``y`` and
``gx`` rounded to float16 (:mod:`cpu_engine.float16`).
"""
import numpy

import chainer
from chainer.functions.normalization import batch_normalization as _bn
from chainer.utils import argument

from cpu_engine import channels_last
from cpu_engine.channel_major import channel_major
from cpu_engine.channel_major import nchw
from cpu_engine.cpu_runtime import fast_paths_enabled
from cpu_engine.cpu_runtime import native_kernels
from cpu_engine.cpu_runtime import parallel_blocks
from cpu_engine.float16 import narrow
from cpu_engine.float16 import widen
from cpu_engine.relu import relu as _relu
from cpu_engine.relu import ReLUGrad


def _columns_kernels(x, *arrays):
    """``cpu_engine._kernels`` where ``x`` is channels-last and it takes
    ``x`` and the 1-D ``arrays`` (float32), else None."""
    if x.size == 0 or not channels_last.is_channels_last(x):
        return None
    return native_kernels(x.transpose(0, 2, 3, 1), *arrays)


class NumPyBatchNormalizationImpl(_bn._BatchNormalizationImpl):
    """Multi-threaded NumPy batch normalization over (0, 2, 3).

    Outputs and input gradients are channels-last (N, C, H, W) arrays for
    float32 channels-last inputs, else channel-major. With ``relu`` the
    forward pass returns ``max(y, 0)``; ``backward`` given the forward's
    ``beta`` as ``relu_beta`` differentiates that: it takes ``gy`` as 0
    where ``y``, recomputed from ``x``, is not positive.
    """

    def __init__(self, relu=False):
        self.relu = relu

    def forward(self, axis, gamma, x, x_layout, xp, expander,
                beta, eps, decay, running_mean, running_var):
        c = x.shape[1]
        m = x.size // max(c, 1)
        mean = numpy.empty(c, x.dtype)
        var = numpy.empty(c, x.dtype)
        inv_std = numpy.empty(c, x.dtype)
        kernels = _columns_kernels(x, gamma, beta)
        if kernels is not None:
            y = channels_last.empty(x.shape, x.dtype)
            kernels.bn_forward_cl(channels_last.rows(x), gamma, beta, eps,
                                  channels_last.rows(y), mean, var, inv_std,
                                  self.relu)
        else:
            y = self._forward_channel_major(x, gamma, beta, eps, mean, var,
                                            inv_std)
        if running_mean is not None:
            adjust = m / max(m - 1., 1.)  # unbiased estimate, as Chainer
            running_mean *= decay
            running_mean += (1 - decay) * mean
            running_var *= decay
            running_var += (1 - decay) * adjust * var
        return y, x_layout, running_mean, running_var, mean, var, inv_std, None

    def _forward_channel_major(self, x, gamma, beta, eps, mean, var,
                               inv_std):
        xc = channel_major(x)
        c = xc.shape[0]
        x2 = xc.reshape(c, -1)
        m = x2.shape[1]
        y2 = numpy.empty_like(x2)
        kernels = native_kernels(x2, gamma, beta)
        if kernels is not None:
            kernels.bn_forward(x2, gamma, beta, eps, y2, mean, var, inv_std,
                               self.relu)
        else:
            def normalize(s):
                xs, ys = x2[s], y2[s]
                mean[s] = numpy.einsum('ij->i', xs) / m
                d = xs - mean[s, None]
                var[s] = numpy.einsum('ij,ij->i', d, d) / m
                inv_std[s] = numpy.reciprocal(numpy.sqrt(var[s] + eps))
                numpy.multiply(d, (gamma[s] * inv_std[s])[:, None], out=ys)
                ys += beta[s, None]
                if self.relu:
                    numpy.maximum(ys, 0, out=ys)
            parallel_blocks(normalize, c, x2[0].nbytes)
        return nchw(y2.reshape(xc.shape))

    def backward(self, axis, gamma, gy, x, x_layout, xp,
                 expander, mean, inv_std, eps, var, forward_data,
                 relu_beta=None):
        c = x.shape[1]
        ggamma = numpy.empty(c, x.dtype)
        gbeta = numpy.empty(c, x.dtype)
        kernels = _columns_kernels(x, gamma, mean, inv_std)
        if gy.dtype != x.dtype:
            kernels = None
        betas = () if relu_beta is None else (relu_beta,)
        if kernels is not None:
            gx = channels_last.empty(x.shape, x.dtype)
            kernels.bn_backward_cl(
                channels_last.rows(x), channels_last.rows(gy), gamma, mean,
                inv_std, channels_last.rows(gx), ggamma, gbeta, *betas)
        else:
            gx = self._backward_channel_major(x, gamma, gy, mean, inv_std,
                                              ggamma, gbeta, betas)
        return gx, x_layout, ggamma, gbeta

    def _backward_channel_major(self, x, gamma, gy, mean, inv_std, ggamma,
                                gbeta, betas):
        xc = channel_major(x)
        c = xc.shape[0]
        x2 = xc.reshape(c, -1)
        gy2 = channel_major(gy).reshape(c, -1)
        inv_m = x.dtype.type(1. / x2.shape[1])
        gx2 = numpy.empty_like(x2)
        kernels = native_kernels(x2, gy2, gamma, mean, inv_std, *betas)
        if kernels is not None:
            kernels.bn_backward(x2, gy2, gamma, mean, inv_std, gx2, ggamma,
                                gbeta, *betas)
        else:
            if betas:  # the forward pass's y > 0, as it computed y
                y2 = (x2 - mean[:, None]) * (gamma * inv_std)[:, None]
                y2 += betas[0][:, None]
                gy2 = gy2 * (y2 > 0)

            def differentiate(s):
                gs, gxs = gy2[s], gx2[s]
                d = x2[s] - mean[s, None]
                gbeta[s] = numpy.einsum('ij->i', gs)
                ggamma[s] = numpy.einsum('ij,ij->i', gs, d) * inv_std[s]
                # gx = coef (gy - x_hat ggamma / m - gbeta / m),
                # x_hat = d inv_std
                coef = gamma[s] * inv_std[s]
                d *= (inv_std[s] * ggamma[s] * inv_m)[:, None]
                d += (gbeta[s] * inv_m)[:, None]
                numpy.subtract(gs, d, out=gxs)
                gxs *= coef[:, None]
            parallel_blocks(differentiate, c, x2[0].nbytes)
        return nchw(gx2.reshape(xc.shape))


class HalfStorageBatchNormalizationImpl(NumPyBatchNormalizationImpl):
    """:class:`NumPyBatchNormalizationImpl` of float16 activations
    with float32 gamma and beta: computed in float32, ``y`` and ``gx``
    rounded to float16; the statistics and ``ggamma``, ``gbeta`` stay
    float32."""

    def forward(self, axis, gamma, x, *args, **kwargs):
        outputs = super(HalfStorageBatchNormalizationImpl, self).forward(
            axis, gamma, widen(x), *args, **kwargs)
        return (narrow(outputs[0]),) + outputs[1:]

    def backward(self, axis, gamma, gy, x, *args, **kwargs):
        gx, x_layout, ggamma, gbeta = super(
            HalfStorageBatchNormalizationImpl, self).backward(
                axis, gamma, widen(gy), widen(x), *args, **kwargs)
        return narrow(gx), x_layout, ggamma, gbeta


def _engine_impl(x, gamma, beta, axis, relu=False):
    """This module's implementation for these inputs, or None where
    Chainer's own applies (other arrays, axes or dtypes)."""
    if (type(x) is numpy.ndarray and type(gamma) is numpy.ndarray
            and type(beta) is numpy.ndarray and x.ndim == 4
            and gamma.ndim == 1 and numpy.ndim(axis) == 1
            and tuple(axis) == (0, 2, 3)
            and gamma.dtype == beta.dtype and fast_paths_enabled()):
        if x.dtype == gamma.dtype:
            return NumPyBatchNormalizationImpl(relu)
        if x.dtype == numpy.float16 and gamma.dtype == numpy.float32:
            return HalfStorageBatchNormalizationImpl(relu)
    return None


def _select_impl(bn, inputs):
    """This module's implementation where it applies, else Chainer's choice."""
    impl = None
    if bn.input_layouts[0] is None:
        impl = _engine_impl(*inputs, axis=bn.axis)
    return impl or _bn._impl_selector(bn, inputs)


class BatchNormalizationReLU(_bn.BatchNormalization):
    """``relu(batch_normalization(x, gamma, beta))``, Chainer's
    ``BatchNormalization`` node whose implementation also clips its output.

    Its gradient is batch normalization's of ReLU's, ``gy [y > 0]``. When
    no graph of it is built (first-order training), one call of the
    implementation computes both; a gradient that is to be differentiated
    again goes through Chainer-differentiable nodes: ReLU's gradient node,
    then Chainer's ``BatchNormalizationGrad``.
    """

    def forward(self, inputs):
        self.retain_outputs((0,))
        self.beta = inputs[2]
        return super(BatchNormalizationReLU, self).forward(inputs)

    def backward(self, indexes, grad_outputs):
        if chainer.config.enable_backprop:
            y = self.get_retained_outputs()[0].array
            return super(BatchNormalizationReLU, self).backward(
                indexes, ReLUGrad(y).apply(grad_outputs))
        x, gamma = self.get_retained_inputs()
        gx, _, ggamma, gbeta = self._impl.backward(
            self.axis, gamma.array, grad_outputs[0].array, x.array, None,
            numpy, self.expander, self.mean, self.inv_std, self.eps, None,
            None, relu_beta=self.beta)
        return tuple(chainer.Variable(g) for g in (gx, ggamma, gbeta))


def batch_normalization(x, gamma, beta, **kwargs):
    """batch_normalization(x, gamma, beta, eps=2e-5, running_mean=None, \
running_var=None, decay=0.9, axis=None, relu=False)

    Drop-in ``chainer.functions.batch_normalization`` (same arguments,
    outputs and running-statistics updates) that uses
    :class:`NumPyBatchNormalizationImpl` for 4-D NumPy inputs
    normalized over (0, 2, 3) and Chainer's implementations otherwise.
    ``relu=True`` returns ``relu`` of the result, computed in the same
    passes over memory where this module's implementation applies
    (:class:`BatchNormalizationReLU`), unless
    ``chainer.config.cpu_fused_relu`` is False (then as two nodes).
    """
    eps, running_mean, running_var, decay, axis, relu = argument.parse_kwargs(
        kwargs, ('eps', 2e-5), ('running_mean', None),
        ('running_var', None), ('decay', 0.9), ('axis', None),
        ('relu', False))
    fused = None
    if relu and getattr(chainer.config, 'cpu_fused_relu', True):
        fused = _engine_impl(
            *[getattr(a, 'array', a) for a in (x, gamma, beta)],
            axis=(0, 2, 3) if axis is None else axis, relu=True)
    if fused is not None:
        return BatchNormalizationReLU(
            eps, running_mean, running_var, decay, axis,
            impl_selector=lambda bn, inputs: fused).apply(
                (x, gamma, beta))[0]
    y = _bn.BatchNormalization(
        eps, running_mean, running_var, decay, axis,
        impl_selector=_select_impl).apply((x, gamma, beta))[0]
    return _relu(y) if relu else y
