"""2-D convolution on NumPy arrays as one GEMM over the whole minibatch.

Chainer's CPU convolution pads the input (``numpy.pad``, even for 1x1
kernels), builds an (N, C, k, k, H, W) im2col matrix, and ``tensordot``
copies it again into GEMM order; its output is an N H W C array behind an
NCHW view. Here activations stay channel-major (see
:mod:`functions.channel_major`), so that

    y (O, N Ho Wo) = W (O, C kh kw) @ col (C kh kw, N Ho Wo)

where ``col`` is the input itself for a 1x1 convolution (subsampled by
slicing for stride > 1) and an im2col matrix written tap by tap otherwise.
The backward pass is two more GEMMs: ``gW = gy @ col^T`` and ``gx`` as the
stride-1 convolution of the (dilated) ``gy`` with the flipped, transposed
kernel, so no col2im scatter is needed either.
"""
import numpy

import chainer
from chainer import function_node
import chainer.functions
from chainer.utils import conv
from chainer.utils import type_check

from functions.channel_major import channel_major
from functions.cpu_runtime import fast_paths_enabled
from functions.channel_major import im2col
from functions.channel_major import nchw
from functions.channel_major import pair


def _columns(xc, kh, kw, sy, sx, ph, pw, out_h, out_w):
    """The (C kh kw, N out_h out_w) GEMM operand of channel-major ``xc``."""
    c, n = xc.shape[:2]
    if kh == kw == 1 and ph == pw == 0:
        if sy != 1 or sx != 1:
            xc = xc[:, :, :(out_h - 1) * sy + 1:sy, :(out_w - 1) * sx + 1:sx]
        return numpy.ascontiguousarray(xc).reshape(c, n * out_h * out_w)
    return im2col(xc, kh, kw, sy, sx, ph, pw, out_h, out_w)


class Convolution2DFunction(function_node.FunctionNode):
    """Convolution of NumPy arrays (no dilation, no groups); first-order.

    Inputs may have any memory layout; outputs and gradients are
    channel-major (N, C, H, W) arrays.
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
        x, W = inputs[:2]
        out_c, _, kh, kw = W.shape
        n, _, h, w = x.shape
        out_h = conv.get_conv_outsize(h, kh, self.sy, self.ph)
        out_w = conv.get_conv_outsize(w, kw, self.sx, self.pw)
        if out_h <= 0 or out_w <= 0:
            raise RuntimeError('Height and width in the output must be '
                               'positive, got {}x{}'.format(out_h, out_w))
        self.x_shape = x.shape
        self.col = _columns(x.transpose(1, 0, 2, 3), kh, kw, self.sy,
                            self.sx, self.ph, self.pw, out_h, out_w)
        y = W.reshape(out_c, -1).dot(self.col)
        if len(inputs) == 3:
            y += inputs[2][:, None]
        self.retain_inputs((1,))
        return nchw(y.reshape(out_c, n, out_h, out_w)),

    def backward(self, indexes, grad_outputs):
        W, = self.get_retained_inputs()
        return Convolution2DGrad(self, indexes).apply((W, grad_outputs[0]))


class Convolution2DGrad(function_node.FunctionNode):
    """Gradients of :class:`Convolution2DFunction` for its ``indexes``."""

    def __init__(self, conv2d, indexes):
        self.conv2d = conv2d
        self.indexes = indexes

    def forward_cpu(self, inputs):
        W, gy = inputs
        f = self.conv2d
        out_c, in_c, kh, kw = W.shape
        n, _, h, w = f.x_shape
        gyc = channel_major(gy)
        gy2 = gyc.reshape(out_c, -1)
        grads = []
        for i in self.indexes:
            if i == 0:
                grads.append(nchw(self._grad_x(W, gyc).reshape(
                    in_c, n, h, w)))
            elif i == 1:
                grads.append(gy2.dot(f.col.T).reshape(W.shape))
            else:
                grads.append(gy2.sum(axis=1))
        return tuple(grads)

    def _grad_x(self, W, gyc):
        """gx (C, N H W) as the stride-1 convolution of the dilated ``gy``."""
        f = self.conv2d
        out_c, in_c, kh, kw = W.shape
        n, _, h, w = f.x_shape
        _, _, out_h, out_w = gyc.shape
        if kh == kw == 1 and f.ph == f.pw == 0:
            gx = W.reshape(out_c, in_c).T.dot(gyc.reshape(out_c, -1))
            if f.sy == f.sx == 1:
                return gx
            full = numpy.zeros((in_c, n, h, w), gx.dtype)
            full[:, :, ::f.sy, ::f.sx] = gx.reshape(in_c, n, out_h, out_w)
            return full.reshape(in_c, -1)
        if f.sy != 1 or f.sx != 1:
            dilated = numpy.zeros(
                (out_c, n, h + 2 * f.ph - kh + 1, w + 2 * f.pw - kw + 1),
                gyc.dtype)
            dilated[:, :, :(out_h - 1) * f.sy + 1:f.sy,
                    :(out_w - 1) * f.sx + 1:f.sx] = gyc
            gyc = dilated
        col = im2col(gyc, kh, kw, 1, 1, kh - 1 - f.ph, kw - 1 - f.pw, h, w)
        flipped = W[:, :, ::-1, ::-1].transpose(1, 0, 2, 3).reshape(in_c, -1)
        return flipped.dot(col)

    def backward(self, indexes, grad_outputs):
        raise NotImplementedError(
            'functions.convolution_2d supports first-order gradients only')


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
        return chainer.functions.convolution_2d(
            x, W, b, stride, pad, cover_all=cover_all, **kwargs)
    inputs = (x, W) if b is None else (x, W, b)
    return Convolution2DFunction(stride, pad).apply(inputs)[0]
