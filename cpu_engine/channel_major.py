"""The channel-major memory layout that the CPU fast paths pass along.

The fast paths keep every (N, C, H, W) activation in (C, N, H, W) memory
order: then a convolution is one GEMM over all images, ``W (O, C k k) @ col
(C k k, N H W)``, and a channel's values are one contiguous row for batch
normalization. Other Chainer functions see ordinary (N, C, H, W) arrays with
permuted strides, and NumPy's element-wise operations keep that order.
"""
import numpy

from cpu_engine.cpu_runtime import contiguous
from cpu_engine.cpu_runtime import parallel_for


def channel_major(x):
    """The (C, N, H, W) C-contiguous array of the (N, C, H, W) array ``x``.

    A view when ``x`` is already stored channel-major, else a copy.
    """
    return contiguous(x.transpose(1, 0, 2, 3))


def nchw(xc):
    """The (N, C, H, W) view of the channel-major array ``xc``."""
    return xc.transpose(1, 0, 2, 3)


def pair(x):
    """``(x, x)`` for a scalar, else ``x`` as a tuple (as Chainer reads it)."""
    if hasattr(x, '__getitem__'):
        return tuple(x)
    return x, x


def tap_ranges(kh, kw, sy, sx, ph, pw, h, w, out_h, out_w):
    """Where each kernel tap of a sliding window reads and writes.

    Returns ``(i, j, dst, src)`` for the taps (i, j) that see any input:
    ``out[:, dst]`` (over N, out_h, out_w) is the part of the output whose
    window tap (i, j) falls inside the input, and ``xc[:, src]`` (over N, H,
    W) is what it reads there, for output rows ``p sy + i - ph`` and columns
    ``q sx + j - pw``. The padding may be asymmetric or negative.
    """
    taps = []
    for i in range(kh):
        p0, p1 = _valid_range(i - ph, sy, h, out_h)
        for j in range(kw):
            q0, q1 = _valid_range(j - pw, sx, w, out_w)
            if p0 >= p1 or q0 >= q1:
                continue
            y0, x0 = p0 * sy + i - ph, q0 * sx + j - pw
            taps.append((i, j,
                         (slice(None), slice(p0, p1), slice(q0, q1)),
                         (slice(None),
                          slice(y0, y0 + (p1 - p0 - 1) * sy + 1, sy),
                          slice(x0, x0 + (q1 - q0 - 1) * sx + 1, sx))))
    return taps


def im2col(xc, kh, kw, sy, sx, ph, pw, out_h, out_w):
    """Patches of ``xc`` (C, N, H, W) as a (C kh kw, N out_h out_w) matrix.

    ``col[(c, i, j), (n, p, q)] = xc[c, n, p sy + i - ph, q sx + j - pw]``,
    zero outside ``xc``; the output size is given, so the padding may be
    asymmetric (or negative). Written in place with one strided copy per
    kernel tap, without padding the input first.
    """
    c, n, h, w = xc.shape
    col = numpy.empty((c, kh, kw, n, out_h, out_w), xc.dtype)
    taps = tap_ranges(kh, kw, sy, sx, ph, pw, h, w, out_h, out_w)
    inside = numpy.zeros((kh, kw), bool)
    for i, j, _, _ in taps:
        inside[i, j] = True

    def fill(lo, hi):
        block = col[lo:hi]
        block[:, ~inside] = 0
        for i, j, dst, src in taps:
            tap = block[:, i, j]
            _, (p0, p1), (q0, q1) = [(s.start, s.stop) for s in dst]
            tap[:, :, :p0] = 0
            tap[:, :, p1:] = 0
            tap[:, :, p0:p1, :q0] = 0
            tap[:, :, p0:p1, q1:] = 0
            tap[(slice(None),) + dst] = xc[(slice(lo, hi),) + src]
    parallel_for(fill, c)
    return col.reshape(c * kh * kw, n * out_h * out_w)


def _valid_range(offset, stride, size, out_size):
    """Output indices p in [p0, p1) with 0 <= p stride + offset < size."""
    p0 = max(0, -(offset // stride))
    p1 = min(out_size, (size - 1 - offset) // stride + 1)
    return p0, max(p0, p1)
