"""The channels-last memory layout, kept where oneDNN convolves it directly.

On CPUs with AVX-512, oneDNN's convolutions take (N, C, H, W) activations
stored as (N, H, W, C) in all three propagations
(:func:`cpu_engine.onednn.convolves_channels_last`), as PyTorch's
``torch.channels_last`` does: then no activation is reordered into a
blocked layout and back. The convolutions return such arrays, batch
normalization, ReLU and max pooling keep the layout of their input, and
other Chainer functions see ordinary (N, C, H, W) arrays with permuted
strides. Elsewhere, and with ``chainer.config.cpu_channels_last = False``,
activations are channel-major (:mod:`cpu_engine.channel_major`).
"""
import chainer
import numpy

from cpu_engine import onednn
from cpu_engine.cpu_runtime import contiguous


def enabled():
    """Whether the convolutions return channels-last activations.

    ``chainer.config.cpu_channels_last``: True or False, or ``'auto'`` (the
    default) for where oneDNN convolves them directly.
    """
    setting = getattr(chainer.config, 'cpu_channels_last', 'auto')
    if setting == 'auto':
        return onednn.convolves_channels_last()
    return bool(setting)


def is_channels_last(x):
    """Whether the 4-D array ``x`` is stored densely as (N, H, W, C)."""
    return x.ndim == 4 and x.transpose(0, 2, 3, 1).flags.c_contiguous


def empty(shape, dtype):
    """An uninitialized channels-last array of the (N, C, H, W) ``shape``."""
    n, c, h, w = shape
    return numpy.empty((n, h, w, c), dtype).transpose(0, 3, 1, 2)


def rows(x):
    """The (N H W, C) C-contiguous array of the (N, C, H, W) array ``x``:
    a view when ``x`` is channels-last, else a copy."""
    return contiguous(x.transpose(0, 2, 3, 1)).reshape(-1, x.shape[1])


def nchw(r, shape):
    """The (N, C, H, W) view of ``shape`` of the channels-last rows ``r``."""
    n, c, h, w = shape
    return r.reshape(n, h, w, c).transpose(0, 3, 1, 2)
