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


def _columns_kernels(x, *arrays):
    """``cpu_engine._kernels`` where ``x`` is channels-last and it takes
    ``x`` and the 1-D ``arrays`` (float32), else None."""
    if x.size == 0 or not channels_last.is_channels_last(x):
        return None
    return native_kernels(x.transpose(0, 2, 3, 1), *arrays)


class NumPyBatchNormalizationImpl(_bn._BatchNormalizationImpl):
    """Multi-threaded NumPy batch normalization over (0, 2, 3).

    Outputs and input gradients are channels-last (N, C, H, W) arrays for
    float32 channels-last inputs, else channel-major.
    """

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
                                  channels_last.rows(y), mean, var, inv_std)
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
            kernels.bn_forward(x2, gamma, beta, eps, y2, mean, var, inv_std)
        else:
            def normalize(s):
                xs, ys = x2[s], y2[s]
                mean[s] = numpy.einsum('ij->i', xs) / m
                d = xs - mean[s, None]
                var[s] = numpy.einsum('ij,ij->i', d, d) / m
                inv_std[s] = numpy.reciprocal(numpy.sqrt(var[s] + eps))
                numpy.multiply(d, (gamma[s] * inv_std[s])[:, None], out=ys)
                ys += beta[s, None]
            parallel_blocks(normalize, c, x2[0].nbytes)
        return nchw(y2.reshape(xc.shape))

    def backward(self, axis, gamma, gy, x, x_layout, xp,
                 expander, mean, inv_std, eps, var, forward_data):
        c = x.shape[1]
        ggamma = numpy.empty(c, x.dtype)
        gbeta = numpy.empty(c, x.dtype)
        kernels = _columns_kernels(x, gamma, mean, inv_std)
        if gy.dtype != x.dtype:
            kernels = None
        if kernels is not None:
            gx = channels_last.empty(x.shape, x.dtype)
            kernels.bn_backward_cl(
                channels_last.rows(x), channels_last.rows(gy), gamma, mean,
                inv_std, channels_last.rows(gx), ggamma, gbeta)
        else:
            gx = self._backward_channel_major(x, gamma, gy, mean, inv_std,
                                              ggamma, gbeta)
        return gx, x_layout, ggamma, gbeta

    def _backward_channel_major(self, x, gamma, gy, mean, inv_std, ggamma,
                                gbeta):
        xc = channel_major(x)
        c = xc.shape[0]
        x2 = xc.reshape(c, -1)
        gy2 = channel_major(gy).reshape(c, -1)
        inv_m = x.dtype.type(1. / x2.shape[1])
        gx2 = numpy.empty_like(x2)
        kernels = native_kernels(x2, gy2, gamma, mean, inv_std)
        if kernels is not None:
            kernels.bn_backward(x2, gy2, gamma, mean, inv_std, gx2, ggamma,
                                gbeta)
        else:
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


def _select_impl(bn, inputs):
    """This module's implementation where it applies, else Chainer's choice."""
    x, gamma, beta = inputs
    if (type(x) is numpy.ndarray and type(gamma) is numpy.ndarray
            and x.ndim == 4 and tuple(bn.axis) == (0, 2, 3)
            and gamma.dtype == beta.dtype
            and bn.input_layouts[0] is None
            and fast_paths_enabled()):
        if x.dtype == gamma.dtype:
            return NumPyBatchNormalizationImpl()
        if x.dtype == numpy.float16 and gamma.dtype == numpy.float32:
            return HalfStorageBatchNormalizationImpl()
    return _bn._impl_selector(bn, inputs)


def batch_normalization(x, gamma, beta, **kwargs):
    """batch_normalization(x, gamma, beta, eps=2e-5, running_mean=None, \
running_var=None, decay=0.9, axis=None)

    Drop-in ``chainer.functions.batch_normalization`` (same arguments,
    outputs and running-statistics updates) that uses
    :class:`NumPyBatchNormalizationImpl` for 4-D NumPy inputs
    normalized over (0, 2, 3) and Chainer's implementations otherwise.
    """
    eps, running_mean, running_var, decay, axis = argument.parse_kwargs(
        kwargs, ('eps', 2e-5), ('running_mean', None),
        ('running_var', None), ('decay', 0.9), ('axis', None))
    return _bn.BatchNormalization(
        eps, running_mean, running_var, decay, axis,
        impl_selector=_select_impl).apply((x, gamma, beta))[0]
