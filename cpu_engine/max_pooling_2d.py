"""Max pooling of NumPy activations in their layout, keeping the winning taps.

Chainer's CPU max pooling pads the input with -inf, builds a (N, C, kh, kw,
Ho, Wo) im2col array, takes its argmax and scatters the gradient back with
col2im. Here ``y = max(y, x[tap])`` is taken over the taps in raster
order, keeping the number (uint8) of the first winning tap; the backward
pass adds ``gy`` into the input gradient at each output's winning tap.
For float32 the C loops of ``cpu_engine._kernels`` do it, on OpenMP
threads, per image row over all channels at once for channels-last inputs
(:mod:`cpu_engine.channels_last`), whose outputs stay channels-last, and
per (channel, image) plane for others, whose outputs are channel-major;
otherwise NumPy does it tap by tap on L2-sized blocks of channels in
parallel, finding the winners with uint8 arithmetic (masked NumPy
assignments, ``copyto(where=)``, run at under 1 GB/s). float16 arrays
are pooled in float32 (:mod:`cpu_engine.float16`), so each input gradient
is summed in float32 and rounded once. The gradient's own gradient, ``ggx``
at the winners, is Chainer's.
"""
import numpy

import chainer
from chainer import function_node
from chainer.functions.pooling import max_pooling_nd
from chainer.functions.pooling.max_pooling_nd import MaxPoolingND
from chainer.functions.pooling.max_pooling_nd import MaxPoolingNDWithIndexes
from chainer.utils import conv
from chainer.utils import type_check

from cpu_engine import channels_last
from cpu_engine.channel_major import channel_major
from cpu_engine.channel_major import nchw
from cpu_engine.channel_major import pair
from cpu_engine.channel_major import tap_ranges
from cpu_engine.cpu_runtime import fast_paths_enabled
from cpu_engine.cpu_runtime import native_kernels
from cpu_engine.cpu_runtime import parallel_blocks
from cpu_engine.float16 import in_float32


def _pool(xs, ys, ws, taps):
    """NumPy max pooling of channel blocks: ``ys`` (from -inf) the maximum
    over ``taps``, ``ws`` (from 0) the number of the first winning one."""
    for dst, src in taps:
        numpy.maximum(ys[dst], xs[src], out=ys[dst])
    # Last writer wins: walk the taps backwards so that the first maximum
    # is kept, as Chainer's argmax does.
    won = numpy.empty(ys.shape, bool)
    step = numpy.empty(ys.shape, numpy.uint8)
    for k in reversed(range(len(taps))):
        dst, src = taps[k]
        wk, uk, sk = won[dst], ws[dst], step[dst]
        numpy.equal(xs[src], ys[dst], out=wk)
        # ws = k where won: ws + won (k - ws), modulo 256.
        numpy.subtract(k, uk, out=sk, dtype=numpy.uint8)
        sk *= wk.view(numpy.uint8)
        uk += sk


class MaxPooling2D(function_node.FunctionNode):
    """Max pooling of a 4-D NumPy array; outputs are channels-last for
    float32 channels-last inputs, else channel-major."""

    def __init__(self, ksize, stride=None, pad=0, cover_all=True):
        self.kh, self.kw = pair(ksize)
        self.sy, self.sx = pair(self.kh if stride is None else stride)
        self.ph, self.pw = pair(pad)
        self.cover_all = cover_all

    def check_type_forward(self, in_types):
        type_check._argname(in_types, ('x',))
        type_check.expect(in_types[0].dtype.kind == 'f',
                          in_types[0].ndim == 4)

    def forward_cpu(self, inputs):
        if inputs[0].dtype == numpy.float16:
            return in_float32(self._forward, inputs)
        return self._forward(inputs)

    def _forward(self, inputs):
        x, = inputs
        n, c, h, w = x.shape
        out_h = conv.get_conv_outsize(h, self.kh, self.sy, self.ph,
                                      self.cover_all)
        out_w = conv.get_conv_outsize(w, self.kw, self.sx, self.pw,
                                      self.cover_all)
        taps = tap_ranges(self.kh, self.kw, self.sy, self.sx, self.ph,
                          self.pw, h, w, out_h, out_w)
        if len(taps) > 255:
            raise ValueError('max_pooling_2d: at most 255 kernel taps, got '
                             '{}'.format(len(taps)))
        # Each tap's number in ``taps`` (255: it sees no input).
        self.tap_index = numpy.full(self.kh * self.kw, 255, numpy.uint8)
        for k, (i, j, _, _) in enumerate(taps):
            self.tap_index[i * self.kw + j] = k
        self.window = (h, w, out_h, out_w, self.kh, self.kw, self.sy,
                       self.sx, self.ph, self.pw)
        self.x_shape = x.shape
        self.kernels = None
        if channels_last.is_channels_last(x):
            self.kernels = native_kernels(x.transpose(0, 2, 3, 1))
        self.channels_last = self.kernels is not None
        if self.channels_last:
            y = channels_last.empty((n, c, out_h, out_w), x.dtype)
            winner = numpy.empty((n, out_h, out_w, c), numpy.uint8)
            self.kernels.max_pool_cl(
                x.transpose(0, 2, 3, 1), y.transpose(0, 2, 3, 1), winner,
                self.tap_index, c, *self.window)
            # (C, N, out_h, out_w), as the channel-major winners.
            self.winner = winner.transpose(3, 0, 1, 2)
            return y,
        xc = channel_major(x)
        y = numpy.empty((c, n, out_h, out_w), x.dtype)
        winner = numpy.empty(y.shape, numpy.uint8)
        self.kernels = native_kernels(xc, y)
        if self.kernels is not None:
            self.kernels.max_pool(xc, y, winner, self.tap_index,
                                  *self.window)
        else:
            y.fill(-numpy.inf)
            winner.fill(0)
            # (dst, src) index all four axes of a block of channels.
            self.taps = [((slice(None),) + dst, (slice(None),) + src)
                         for _, _, dst, src in taps]
            parallel_blocks(
                lambda s: _pool(xc[s], y[s], winner[s], self.taps),
                c, y[0].nbytes)
        self.winner = winner
        return nchw(y),

    def backward(self, indexes, grad_outputs):
        return MaxPooling2DGrad(self).apply(grad_outputs)

    def as_chainer(self):
        """Chainer's ``MaxPoolingND`` of this pooling with its ``indexes``:
        the winners as each window's argmax ``i kw + j``, 0 (as Chainer's
        argmax) where the window lies wholly in the padding."""
        h, w = self.x_shape[2:]
        out_h, out_w = self.winner.shape[2:]
        index = numpy.zeros(self.winner.shape, numpy.int64)
        for k, (i, j, dst, _) in enumerate(tap_ranges(
                self.kh, self.kw, self.sy, self.sx, self.ph, self.pw, h, w,
                out_h, out_w)):
            dst = (slice(None),) + dst
            index[dst][self.winner[dst] == k] = i * self.kw + j
        pooling = MaxPoolingND(2, (self.kh, self.kw), (self.sy, self.sx),
                               (self.ph, self.pw), self.cover_all)
        pooling.indexes = index.transpose(1, 0, 2, 3)
        return pooling


class MaxPooling2DGrad(function_node.FunctionNode):
    """Gradient of :class:`MaxPooling2D`; its own gradient is Chainer's
    ``MaxPoolingNDWithIndexes``, which picks ``ggx`` at the winners."""

    def __init__(self, pooling):
        self.pooling = pooling

    def forward_cpu(self, inputs):
        if inputs[0].dtype == numpy.float16:
            return in_float32(self._forward, inputs)
        return self._forward(inputs)

    def _forward(self, inputs):
        p = self.pooling
        n, c, h, w = p.x_shape
        if p.channels_last:
            gx = channels_last.empty(p.x_shape, numpy.float32)
            p.kernels.max_pool_grad_cl(
                channels_last.rows(inputs[0]),
                p.winner.transpose(1, 2, 3, 0), p.tap_index,
                gx.transpose(0, 2, 3, 1), c, *p.window)
            return gx,
        gyc = channel_major(inputs[0])
        if p.kernels is not None:
            gx = numpy.empty((c, n, h, w), gyc.dtype)
            p.kernels.max_pool_grad(gyc, p.winner, p.tap_index, gx,
                                    *p.window)
            return nchw(gx),
        gx = numpy.zeros((c, n, h, w), gyc.dtype)

        def scatter(s):
            gys, ws, gxs = gyc[s], p.winner[s], gx[s]
            share = numpy.empty(gys.shape, gys.dtype)
            for k, (dst, src) in enumerate(p.taps):
                part = share[dst]
                numpy.equal(ws[dst], k, out=part)
                part *= gys[dst]
                gxs[src] += part
        parallel_blocks(scatter, c, gyc[0].nbytes)
        return nchw(gx),

    def backward(self, indexes, grad_outputs):
        return MaxPoolingNDWithIndexes(self.pooling.as_chainer()).apply(
            grad_outputs)


def max_pooling_2d(x, ksize, stride=None, pad=0, cover_all=True,
                   return_indices=False):
    """Drop-in ``chainer.functions.max_pooling_2d`` with a NumPy fast path.

    CuPy, ChainerX and iDeep arrays, and ``return_indices``, go to
    Chainer's own function.
    """
    array = x.array if isinstance(x, chainer.Variable) else x
    if (return_indices or type(array) is not numpy.ndarray
            or not fast_paths_enabled()):
        return max_pooling_nd.max_pooling_2d(
            x, ksize, stride, pad, cover_all, return_indices)
    return MaxPooling2D(ksize, stride, pad, cover_all).apply((x,))[0]
