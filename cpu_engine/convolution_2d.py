"""2-D convolution on NumPy arrays: oneDNN's kernels, or GEMMs.

For float32, the layers where it pays go to oneDNN's direct convolutions
(:mod:`cpu_engine.onednn`; :func:`_path` says which): every layer but the
small and strided 1x1 ones where oneDNN takes channels-last activations
(:mod:`cpu_engine.channels_last`), which the layers then return. Those 1x1
layers are one GEMM of the (N Ho Wo, C) rows. With channel-major
activations (:mod:`cpu_engine.channel_major`) the other layers are

    y (O, N Ho Wo) = W (O, C kh kw) @ col (C kh kw, N Ho Wo)

with ``col`` the input itself for 1x1 kernels, else an im2col matrix built
:data:`CHUNK_BYTES` at a time; ``gW = gy @ col^T`` and ``gx`` is the
stride-1 convolution of the (dilated) ``gy`` with the flipped, transposed
kernel. See docs/cpu_performance.md. float16 inputs are convolved in
float32 and each result rounded to float16 (:mod:`cpu_engine.float16`).
The gradients' own gradients are Chainer's functions of them.
"""
import numpy

import chainer
from chainer import function_node
import chainer.functions
from chainer.functions.connection import convolution_2d as chainer_conv
from chainer.utils import conv
from chainer.utils import type_check

from cpu_engine import channels_last
from cpu_engine.channel_major import channel_major
from cpu_engine.channel_major import im2col
from cpu_engine.channel_major import nchw
from cpu_engine.channel_major import pair
from cpu_engine.cpu_runtime import fast_paths_enabled
from cpu_engine.float16 import in_float32
from cpu_engine import onednn


# Bytes of im2col columns built at a time (a few MB: they stay in cache
# between being written and being read by the GEMM).
CHUNK_BYTES = 8 << 20

# Output pixels per image from which oneDNN convolves a layer of
# channel-major activations: 4x4 for larger kernels, 8x8 for 1x1; below
# which a 1x1 layer of channels-last ones is a GEMM (see :func:`_path`).
ONEDNN_MIN_PIXELS = 16
ONEDNN_MIN_PIXELS_1X1 = 64
ROWS_MAX_PIXELS = 64


def _onednn_on(dtype):
    """Whether oneDNN takes float32 work: loaded and not switched off."""
    return (dtype == numpy.float32 and onednn.available()
            and getattr(chainer.config, 'cpu_onednn', True))


def _path(x, W, stride, pad, out_h, out_w, last):
    """How a layer convolves ``x``: ``'onednn'``, oneDNN's direct
    convolutions; ``'rows'``, GEMMs of channels-last rows (1x1 kernels);
    ``'columns'``, GEMMs of channel-major im2col columns.

    oneDNN takes float32 where it is loaded and not switched off
    (``chainer.config.cpu_onednn``), and not every layer: with
    channels-last activations (``last``), unpadded 1x1 convolutions with under
    :data:`ROWS_MAX_PIXELS` output pixels per image are one GEMM of the
    rows (of a strided slice's copy); with channel-major ones,
    its reorders and per-call set-up cost more than its kernels save on
    small outputs and on strided 1x1 convolutions, which the NumPy path
    does as one GEMM of a slice (measured per layer in
    docs/cpu_performance.md).
    """
    if not _onednn_on(x.dtype) or W.size == 0:  # oneDNN takes no empty W
        return 'columns'
    one_by_one = W.shape[2:] == (1, 1) and pad == (0, 0)
    if last:
        if one_by_one and out_h * out_w < ROWS_MAX_PIXELS:
            return 'rows'
        return 'onednn'
    if W.shape[2:] == (1, 1):
        if stride == (1, 1) and out_h * out_w >= ONEDNN_MIN_PIXELS_1X1:
            return 'onednn'
        return 'columns'
    return 'onednn' if out_h * out_w >= ONEDNN_MIN_PIXELS else 'columns'


def _matmul(a, b, out=None):
    """``a @ b``: by oneDNN's GEMM where it convolves float32 (one thread
    pool for the whole step), else by NumPy's BLAS."""
    if _onednn_on(a.dtype):
        return onednn.matmul(a, b, out)
    return numpy.matmul(a, b, out=out)


def _image_chunks(n, rows, pixels, itemsize, im2col_needed):
    """``(n0, n1)`` ranges of images whose im2col columns fit a chunk."""
    if not im2col_needed:
        return [(0, n)]
    step = max(1, CHUNK_BYTES // max(1, rows * pixels * itemsize))
    return [(i, min(n, i + step)) for i in range(0, n, step)]


def _matrix(a):
    """``a`` as a (len(a), rest) matrix, also where an axis is empty."""
    return a.reshape(a.shape[0], int(numpy.prod(a.shape[1:])))


def _needs_im2col(kh, kw, ph, pw):
    return not (kh == kw == 1 and ph == pw == 0)


def _columns(xc, kh, kw, sy, sx, ph, pw, out_h, out_w):
    """The (C kh kw, N out_h out_w) GEMM operand of channel-major ``xc``."""
    c, n = xc.shape[:2]
    if not _needs_im2col(kh, kw, ph, pw):
        if sy != 1 or sx != 1:
            xc = xc[:, :, :(out_h - 1) * sy + 1:sy, :(out_w - 1) * sx + 1:sx]
        return numpy.ascontiguousarray(xc).reshape(c, n * out_h * out_w)
    return im2col(xc, kh, kw, sy, sx, ph, pw, out_h, out_w)


def _convolve(Wm, xc, kh, kw, sy, sx, ph, pw, out_h, out_w):
    """``Wm (O, C kh kw) @ col``: the (O, N out_h out_w) output, by chunks."""
    c, n = xc.shape[:2]
    pixels = out_h * out_w
    y = numpy.empty((Wm.shape[0], n * pixels), xc.dtype)
    for n0, n1 in _image_chunks(n, Wm.shape[1], pixels, xc.itemsize,
                                _needs_im2col(kh, kw, ph, pw)):
        col = _columns(xc[:, n0:n1], kh, kw, sy, sx, ph, pw, out_h, out_w)
        _matmul(Wm, col, out=y[:, n0 * pixels:n1 * pixels])
    return y


def _correlate(gy2, xc, kh, kw, sy, sx, ph, pw, out_h, out_w):
    """``gy2 (O, N out_h out_w) @ col^T``: the weight gradient, by chunks."""
    c, n = xc.shape[:2]
    pixels = out_h * out_w
    gW = None
    for n0, n1 in _image_chunks(n, c * kh * kw, pixels, xc.itemsize,
                                _needs_im2col(kh, kw, ph, pw)):
        col = _columns(xc[:, n0:n1], kh, kw, sy, sx, ph, pw, out_h, out_w)
        part = _matmul(gy2[:, n0 * pixels:n1 * pixels], col.T)
        if gW is None:
            gW = part
        else:
            gW += part
    return gW


def _rows_convolve(rows, W2):
    """``y = x W^T`` of a 1x1 layer: (pixels, O) from (pixels, C) rows."""
    return _matmul(rows, W2.T)


def _rows_grad_x(gy_rows, W2):
    """``gx = gy W`` of a 1x1 layer: (pixels, C) rows."""
    return _matmul(gy_rows, W2)


def _rows_correlate(gy_rows, rows):
    """``gW = gy^T x`` of a 1x1 layer: (O, C)."""
    return _matmul(gy_rows.T, rows)


class Convolution2DFunction(function_node.FunctionNode):
    """Convolution of NumPy arrays (no dilation, no groups).

    Inputs may have any memory layout; outputs and gradients are
    channels-last (N, C, H, W) arrays where the engine keeps activations
    so (:func:`cpu_engine.channels_last.enabled`), else channel-major.
    """

    def __init__(self, stride=1, pad=0):
        self.sy, self.sx = pair(stride)
        self.ph, self.pw = pair(pad)

    def check_type_forward(self, in_types):
        n_in = in_types.size()
        type_check.expect(2 <= n_in, n_in <= 3)
        x_type, w_type = in_types[:2]
        type_check.expect(
            x_type.dtype.kind == 'f',
            w_type.dtype == x_type.dtype,
            x_type.ndim == 4,
            w_type.ndim == 4,
            x_type.shape[1] == w_type.shape[1],
        )
        if type_check.eval(n_in) == 3:
            b_type = in_types[2]
            type_check.expect(
                b_type.dtype == x_type.dtype,
                b_type.ndim == 1,
                b_type.shape[0] == w_type.shape[0],
            )

    def forward_cpu(self, inputs):
        self.retain_inputs((0, 1))
        if inputs[0].dtype == numpy.float16:
            return in_float32(self._forward, inputs)
        return self._forward(inputs)

    def _forward(self, inputs):
        x, W = inputs[:2]
        out_c, _, kh, kw = W.shape
        n, _, h, w = x.shape
        out_h = conv.get_conv_outsize(h, kh, self.sy, self.ph)
        out_w = conv.get_conv_outsize(w, kw, self.sx, self.pw)
        if out_h <= 0 or out_w <= 0:
            raise RuntimeError('Height and width in the output must be '
                               'positive, got {}x{}'.format(out_h, out_w))
        self.x_shape = x.shape
        last = channels_last.enabled()
        self.path = _path(x, W, (self.sy, self.sx), (self.ph, self.pw),
                          out_h, out_w, last)
        self.channels_last = last and self.path != 'columns'
        if self.path == 'onednn':
            y = self._empty((n, out_c, out_h, out_w), x.dtype)
            # x in oneDNN's layout, for the weight gradient.
            self.kept = []
            onednn.convolution(
                [('forward', x, W, y)], (self.sy, self.sx),
                (self.ph, self.pw), self.kept, self.channels_last)
        elif self.path == 'rows':
            y = channels_last.nchw(
                _rows_convolve(self._rows(x), _matrix(W)),
                (n, out_c, out_h, out_w))
        else:
            y = nchw(_convolve(
                _matrix(W), x.transpose(1, 0, 2, 3), kh, kw,
                self.sy, self.sx, self.ph, self.pw, out_h,
                out_w).reshape(out_c, n, out_h, out_w))
        if len(inputs) == 3:
            y += inputs[2][:, None, None]
        return y,

    def _rows(self, x):
        """The (N out_h out_w, C) rows of a 1x1 layer's input pixels."""
        if self.sy != 1 or self.sx != 1:
            x = x[:, :, ::self.sy, ::self.sx]
        return channels_last.rows(x)

    def _empty(self, shape, dtype):
        """An output or gradient array of the (N, C, H, W) ``shape`` in
        this layer's layout."""
        if self.channels_last:
            return channels_last.empty(shape, dtype)
        n, c, h, w = shape
        return nchw(numpy.empty((c, n, h, w), dtype))

    def backward(self, indexes, grad_outputs):
        x, W = self.get_retained_inputs()
        return Convolution2DGrad(self, indexes).apply(
            (x, W, grad_outputs[0]))


class Convolution2DGrad(function_node.FunctionNode):
    """Gradients of :class:`Convolution2DFunction` for its ``indexes``:

        gx = deconv(gy, W),    gW = conv_grad_W(x, gy),    gb = sum(gy),

    each linear in ``gy`` and in ``W`` or ``x``; their gradients are
    Chainer's functions (those of Chainer's ``Convolution2DFunction``).
    """

    def __init__(self, conv2d, indexes):
        self.conv2d = conv2d
        self.indexes = indexes

    def forward_cpu(self, inputs):
        self.retain_inputs((0, 1, 2))
        if inputs[0].dtype == numpy.float16:
            return in_float32(self._grads, inputs)
        return self._grads(inputs)

    def _grads(self, inputs):
        x, W, gy = inputs
        if self.conv2d.path == 'onednn':
            return self._onednn_grads(x, W, gy)
        if self.conv2d.path == 'rows':
            return self._rows_grads(x, W, gy)
        f = self.conv2d
        out_c, in_c, kh, kw = W.shape
        n, _, h, w = f.x_shape
        gyc = channel_major(gy)
        gy2 = _matrix(gyc)
        grads = []
        for i in self.indexes:
            if i == 0:
                grads.append(nchw(self._grad_x(W, gyc).reshape(
                    in_c, n, h, w)))
            elif i == 1:
                grads.append(_correlate(
                    gy2, x.transpose(1, 0, 2, 3), kh, kw, f.sy, f.sx, f.ph,
                    f.pw, gyc.shape[2], gyc.shape[3]).reshape(W.shape))
            else:
                grads.append(gy2.sum(axis=1))
        return tuple(grads)

    def _rows_grads(self, x, W, gy):
        """``gx = gy W`` and ``gW = gy^T x`` of a 1x1 layer, over
        channels-last rows; a strided layer's ``gx`` is zero between the
        pixels it read."""
        f = self.conv2d
        n, c, h, w = f.x_shape
        W2 = W.reshape(W.shape[0], c)
        gy2 = channels_last.rows(gy)
        grads = []
        for i in self.indexes:
            if i == 0:
                gx = channels_last.nchw(_rows_grad_x(gy2, W2),
                                        (n, c) + gy.shape[2:])
                if f.sy != 1 or f.sx != 1:
                    full = channels_last.empty(f.x_shape, gx.dtype)
                    full[...] = 0
                    full[:, :, ::f.sy, ::f.sx] = gx
                    gx = full
                grads.append(gx)
            elif i == 1:
                grads.append(_rows_correlate(gy2, f._rows(x)).reshape(
                    W.shape))
            else:
                grads.append(gy2.sum(axis=0))
        return tuple(grads)

    def _onednn_grads(self, x, W, gy):
        f = self.conv2d
        n, c, h, w = f.x_shape
        grads, propagations = [], []
        for i in self.indexes:
            if i == 0:
                grads.append(f._empty((n, c, h, w), x.dtype))
                propagations.append(('backward_data', grads[-1], W, gy))
            elif i == 1:
                grads.append(numpy.empty_like(W))
                propagations.append(('backward_weights', x, grads[-1], gy))
            else:
                grads.append(gy.sum(axis=(0, 2, 3)))
        onednn.convolution(propagations, (f.sy, f.sx), (f.ph, f.pw), f.kept,
                           f.channels_last)
        f.kept = None
        return tuple(grads)

    def _grad_x(self, W, gyc):
        """gx (C, N H W) as the stride-1 convolution of the dilated ``gy``."""
        f = self.conv2d
        out_c, in_c, kh, kw = W.shape
        n, _, h, w = f.x_shape
        _, _, out_h, out_w = gyc.shape
        if kh == kw == 1 and f.ph == f.pw == 0:
            gx = _matmul(W.reshape(out_c, in_c).T, _matrix(gyc))
            if f.sy == f.sx == 1:
                return gx
            full = numpy.zeros((in_c, n, h, w), gx.dtype)
            full[:, :, ::f.sy, ::f.sx] = gx.reshape(in_c, n, out_h, out_w)
            return _matrix(full)
        if f.sy != 1 or f.sx != 1:
            dilated = numpy.zeros(
                (out_c, n, h + 2 * f.ph - kh + 1, w + 2 * f.pw - kw + 1),
                gyc.dtype)
            dilated[:, :, :(out_h - 1) * f.sy + 1:f.sy,
                    :(out_w - 1) * f.sx + 1:f.sx] = gyc
            gyc = dilated
        flipped = _matrix(W[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
        return _convolve(numpy.ascontiguousarray(flipped), gyc, kh, kw, 1, 1,
                         kh - 1 - f.ph, kw - 1 - f.pw, h, w)

    def backward(self, indexes, grad_outputs):
        """``ggx``, ``ggW``, ``ggb`` back to ``x``, ``W`` and ``gy``:

            x:  deconv(gy, ggW),    W:  conv_grad_W(ggx, gy),
            gy: conv(ggx, W) + conv(x, ggW) + ggb (over N, H, W).
        """
        x, W, gy = self.get_retained_inputs()
        gg = dict(zip(self.indexes, grad_outputs))
        ggx, ggW, ggb = gg.get(0), gg.get(1), gg.get(2)
        f = self.conv2d
        stride, pad = (f.sy, f.sx), (f.ph, f.pw)
        grads = []
        if 0 in indexes:
            grads.append(None if ggW is None else
                         chainer.functions.deconvolution_2d(
                             gy, ggW, stride=stride, pad=pad,
                             outsize=x.shape[2:]))
        if 1 in indexes:
            grads.append(None if ggx is None else
                         chainer_conv.Convolution2DGradW(
                             chainer_conv.Convolution2DFunction(stride, pad),
                             W.shape, W.dtype, None).apply((ggx, gy))[0])
        if 2 in indexes:
            terms = []
            if ggx is not None:
                terms.append(chainer_conv.convolution_2d(
                    ggx, W, stride=stride, pad=pad))
            if ggW is not None:
                terms.append(chainer_conv.convolution_2d(
                    x, ggW, stride=stride, pad=pad))
            if ggb is not None:
                terms.append(chainer.functions.broadcast_to(
                    ggb.reshape(1, -1, 1, 1), gy.shape))
            grads.append(sum(terms[1:], terms[0]) if terms else None)
        return grads


def convolution_2d(x, W, b=None, stride=1, pad=0, cover_all=False, **kwargs):
    """Drop-in ``chainer.functions.convolution_2d`` with a NumPy fast path.

    NumPy inputs of one dtype without dilation, groups or ``cover_all`` go
    through :class:`Convolution2DFunction`; anything else (CuPy, ChainerX,
    iDeep, the other options) is passed to Chainer's own function unchanged.
    """
    arrays = [a.array if isinstance(a, chainer.Variable) else a
              for a in (x, W, b) if a is not None]
    options = dict(kwargs)
    plain = (not cover_all
             and pair(options.pop('dilate', 1)) == (1, 1)
             and options.pop('groups', 1) == 1
             and not options.pop('cudnn_fast', False)
             and not options)
    if (not plain or not fast_paths_enabled()
            or any(type(a) is not numpy.ndarray for a in arrays)
            or len({a.dtype for a in arrays}) != 1):
        return chainer_conv.convolution_2d(
            x, W, b, stride, pad, cover_all=cover_all, **kwargs)
    inputs = (x, W) if b is None else (x, W, b)
    return Convolution2DFunction(stride, pad).apply(inputs)[0]
