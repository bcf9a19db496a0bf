"""oneDNN convolutions on NumPy arrays, through oneDNN's C API.

Chainer's own CPU acceleration, iDeep, was a binding of this library
(then MKL-DNN) and has no wheels for current Pythons. The
``onednn-cpu-gomp`` wheel ships ``libdnnl.so.3`` (oneDNN 3.2, Apache 2.0)
into the environment's ``lib/``; this module calls it with ``ctypes``. Its
direct convolutions (``jit:avx2``, ``brgconv:avx512_core``, ...) build no
im2col matrix. They take channels-last activations as they are where the
CPU has AVX-512 (:func:`convolves_channels_last`), as PyTorch's
channels-last convolutions do; otherwise they work on channel-blocked
copies (``nChw8c``), so every call reorders its operands from the caller's
layout into the primitive's and the result back, and the forward pass's
reordered input is kept for the weight gradient (``kept`` of
:func:`convolution`). Weights are reordered on every call.

:func:`available` says whether the library could be loaded; without it
:mod:`cpu_engine.convolution_2d` uses its NumPy GEMMs. Primitives are built
once per layer shape and layout and kept (:func:`convolution`).
"""
import ctypes
import functools
import os
import sys

import numpy

LIBRARY = 'libdnnl.so.3'

# Values from oneDNN 3.2's dnnl_types.h and dnnl_common_types.h.
_SUCCESS = 0
_OUT_OF_MEMORY = 1
_CPU_ENGINE = 1
_STREAM_IN_ORDER = 1
_F32 = 3
_FORMAT_ANY = 1
_FORWARD_TRAINING = 64
_BACKWARD_DATA = 160
_BACKWARD_WEIGHTS = 192
_CONVOLUTION_DIRECT = 1
_ISA_AVX512_CORE = 0x27
_QUERY_SRC_MD = 129
_QUERY_DIFF_SRC_MD = 130
_QUERY_WEIGHTS_MD = 131
_QUERY_DIFF_WEIGHTS_MD = 132
_QUERY_DST_MD = 133
_QUERY_DIFF_DST_MD = 134
ARG_SRC = 1
ARG_DST = 17
ARG_WEIGHTS = 33
ARG_DIFF_SRC = 129
ARG_DIFF_DST = 145
ARG_DIFF_WEIGHTS = 161

_Dims = ctypes.c_int64 * 12


class _ExecArg(ctypes.Structure):
    _fields_ = [('arg', ctypes.c_int), ('memory', ctypes.c_void_p)]


def _load():
    """The oneDNN library, or None where it is not installed."""
    if os.environ.get('CHAINER_ONEDNN', '1') == '0':
        return None
    for path in (os.path.join(sys.prefix, 'lib', LIBRARY), LIBRARY):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        lib.dnnl_primitive_desc_query_md.restype = ctypes.c_void_p
        lib.dnnl_primitive_desc_query_md.argtypes = (
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
        lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        lib.dnnl_memory_desc_get_size.argtypes = (ctypes.c_void_p,)
        lib.dnnl_memory_desc_equal.argtypes = (ctypes.c_void_p,
                                               ctypes.c_void_p)
        lib.dnnl_sgemm.argtypes = (
            (ctypes.c_char, ctypes.c_char)
            + (ctypes.c_int64,) * 3 + (ctypes.c_float,)
            + (ctypes.c_void_p, ctypes.c_int64) * 2
            + (ctypes.c_float, ctypes.c_void_p, ctypes.c_int64))
        return lib
    return None


_lib = _load()
_engine = ctypes.c_void_p()
_stream = ctypes.c_void_p()


def available():
    """Whether oneDNN is loaded (and so used for float32 convolutions)."""
    return _lib is not None


@functools.lru_cache(maxsize=None)
def convolves_channels_last():
    """Whether oneDNN's convolutions take channels-last activations
    directly in all three propagations: on CPUs with AVX-512 (its
    ``brgconv`` kernels); on AVX2 its 1x1 convolutions of them fall back to
    reference code, hundreds of times slower."""
    return (_lib is not None and _lib.dnnl_get_effective_cpu_isa()
            & _ISA_AVX512_CORE == _ISA_AVX512_CORE)


def _check(status, what):
    """oneDNN's out of memory is a MemoryError, as NumPy's is, so that the
    job ends it with its advice; any other failure a RuntimeError."""
    if status == _OUT_OF_MEMORY:
        raise MemoryError('oneDNN {} could not allocate its memory'.format(
            what))
    if status != _SUCCESS:
        raise RuntimeError('oneDNN {} failed with status {}'.format(
            what, status))


def _ensure_engine():
    if not _engine.value:
        _check(_lib.dnnl_engine_create(ctypes.byref(_engine), _CPU_ENGINE,
                                       ctypes.c_size_t(0)), 'engine')
        _check(_lib.dnnl_stream_create(ctypes.byref(_stream), _engine,
                                       ctypes.c_uint(_STREAM_IN_ORDER)),
               'stream')


def _gemm_operand(a):
    """``(transposed, leading dimension, array)`` of a 2-D float32 GEMM
    operand: rows or columns must be unit-stride, else it is copied."""
    rows, cols = (s // a.itemsize for s in a.strides)
    if cols == 1 and rows >= max(1, a.shape[1]):
        return b'N', rows, a
    if rows == 1 and cols >= max(1, a.shape[0]):
        return b'T', cols, a
    a = numpy.ascontiguousarray(a)
    return b'N', max(1, a.shape[1]), a


def matmul(a, b, out=None):
    """``a @ b`` of 2-D float32 arrays by oneDNN's ``sgemm``.

    It runs on the OpenMP threads of the convolutions and of
    ``cpu_engine._kernels``, not on a BLAS's own pool. ``a`` and ``b`` may
    be transposed views; ``out``, if given, must have unit-stride rows.
    """
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = numpy.empty((m, n), numpy.float32)
    if m == 0 or n == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    transa, lda, a = _gemm_operand(a)
    transb, ldb, b = _gemm_operand(b)
    _check(_lib.dnnl_sgemm(transa, transb, m, n, k, 1.0, a.ctypes.data,
                           lda, b.ctypes.data, ldb, 0.0, out.ctypes.data,
                           out.strides[0] // out.itemsize), 'sgemm')
    return out


def _md_of(shape, strides=None):
    """A float32 memory descriptor: the given element strides, else 'any'."""
    md = ctypes.c_void_p()
    if strides is None:
        _check(_lib.dnnl_memory_desc_create_with_tag(
            ctypes.byref(md), len(shape), _Dims(*shape), _F32, _FORMAT_ANY),
            'memory descriptor')
    else:
        _check(_lib.dnnl_memory_desc_create_with_strides(
            ctypes.byref(md), len(shape), _Dims(*shape), _F32,
            _Dims(*strides)), 'memory descriptor')
    return md


def _layout(a):
    """``(shape, element strides)`` of the array ``a``."""
    return a.shape, tuple(s // a.itemsize for s in a.strides)


def _channels_last_strides(shape):
    """Element strides of the (N, C, H, W) ``shape`` stored as (N, H, W, C)."""
    n, c, h, w = shape
    return h * w * c, 1, w * c, c


def _primitive(pd, what):
    prim = ctypes.c_void_p()
    _check(_lib.dnnl_primitive_create(ctypes.byref(prim), pd), what)
    return prim


def _execute(prim, args, what):
    exec_args = (_ExecArg * len(args))(*[_ExecArg(k, v) for k, v in args])
    _check(_lib.dnnl_primitive_execute(prim, _stream, len(args), exec_args),
           what)


def _memory(md, data):
    mem = ctypes.c_void_p()
    _check(_lib.dnnl_memory_create(ctypes.byref(mem), md, _engine,
                                   ctypes.c_void_p(data)), 'memory')
    return mem


class _Operand(object):
    """One argument of a primitive: the caller's layout and the primitive's.

    When they differ, a reorder primitive copies between them through a
    buffer in the primitive's layout (a fresh NumPy array per call).
    """

    def __init__(self, arg, user_md, pd, query, is_output):
        self.arg = arg
        self.user_md = user_md
        self.md = ctypes.c_void_p(
            _lib.dnnl_primitive_desc_query_md(pd, query, 0))
        self.is_output = is_output
        self.reorder = None
        if not _lib.dnnl_memory_desc_equal(self.md, user_md):
            src, dst = ((self.md, user_md) if is_output
                        else (user_md, self.md))
            rpd = ctypes.c_void_p()
            _check(_lib.dnnl_reorder_primitive_desc_create(
                ctypes.byref(rpd), src, _engine, dst, _engine, None),
                'reorder descriptor')
            self.reorder = _primitive(rpd, 'reorder')
            self.size = _lib.dnnl_memory_desc_get_size(self.md)

    def bind(self, array, scope):
        """The memory to hand the primitive for ``array``, in ``scope``.

        An input is reordered now, unless ``scope`` already holds a copy
        of it in this layout; an output's reorder is left to
        ``scope.finish``.
        """
        if self.reorder is not None and not self.is_output:
            buf = scope.find(array, self.md)
            if buf is not None:
                return scope.memory(self.md, buf)
        user = scope.memory(self.user_md, array)
        if self.reorder is None:
            return user
        buf = numpy.empty(self.size // 4, numpy.float32)
        mem = scope.memory(self.md, buf)
        if self.is_output:
            scope.pending.append(
                (self.reorder, ((ARG_SRC, mem), (ARG_DST, user))))
        else:
            _execute(self.reorder, ((ARG_SRC, user), (ARG_DST, mem)),
                     'reorder')
            scope.reordered.append((array, self.md, buf))
        return mem


class _Scope(object):
    """Memory objects of primitives run together, and the copies of inputs
    in the primitives' layouts: ``(array, layout, copy)``, made here
    (``reordered``) or by an earlier call (``kept``).

    Keeps every array a memory object points to alive until the memory is
    destroyed on exit.
    """

    def __init__(self, kept=()):
        self.memories = []
        self.kept = kept
        self.reordered = []
        self.pending = []

    def memory(self, md, array):
        mem = _memory(md, array.ctypes.data)
        self.memories.append((mem, array))
        return mem

    def find(self, array, md):
        """A copy of ``array`` in the layout ``md``, or None."""
        for a, a_md, buf in self.reordered + list(self.kept):
            if a is array and _lib.dnnl_memory_desc_equal(a_md, md):
                return buf
        return None

    def finish(self):
        """Runs the reorders of the outputs into the callers' arrays."""
        for reorder, pair in self.pending:
            _execute(reorder, pair, 'reorder')
        del self.pending[:]

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        for mem, _ in self.memories:
            _lib.dnnl_memory_destroy(mem)


_PROPAGATIONS = {
    'forward': (_FORWARD_TRAINING, ((ARG_SRC, _QUERY_SRC_MD, False),
                                    (ARG_WEIGHTS, _QUERY_WEIGHTS_MD, False),
                                    (ARG_DST, _QUERY_DST_MD, True))),
    'backward_data': (_BACKWARD_DATA, (
        (ARG_DIFF_SRC, _QUERY_DIFF_SRC_MD, True),
        (ARG_WEIGHTS, _QUERY_WEIGHTS_MD, False),
        (ARG_DIFF_DST, _QUERY_DIFF_DST_MD, False))),
    'backward_weights': (_BACKWARD_WEIGHTS, (
        (ARG_SRC, _QUERY_SRC_MD, False),
        (ARG_DIFF_WEIGHTS, _QUERY_DIFF_WEIGHTS_MD, True),
        (ARG_DIFF_DST, _QUERY_DIFF_DST_MD, False))),
}


def _descriptor(prop, mds, geometry):
    """The primitive descriptor of a convolution propagation.

    ``mds`` are the memory descriptors of x, W and y (or their gradients).
    """
    md_x, md_W, md_y = mds
    fwd = ctypes.c_void_p()
    _check(_lib.dnnl_convolution_forward_primitive_desc_create(
        ctypes.byref(fwd), _engine, _FORWARD_TRAINING, _CONVOLUTION_DIRECT,
        md_x, md_W, None, md_y, *geometry, None), 'convolution descriptor')
    if prop == _FORWARD_TRAINING:
        return fwd
    pd = ctypes.c_void_p()
    if prop == _BACKWARD_DATA:
        _check(_lib.dnnl_convolution_backward_data_primitive_desc_create(
            ctypes.byref(pd), _engine, _CONVOLUTION_DIRECT, md_x, md_W,
            md_y, *geometry, fwd, None), 'convolution descriptor')
    else:
        _check(_lib.dnnl_convolution_backward_weights_primitive_desc_create(
            ctypes.byref(pd), _engine, _CONVOLUTION_DIRECT, md_x, md_W,
            None, md_y, *geometry, fwd, None), 'convolution descriptor')
    return pd


class _Convolution(object):
    """A oneDNN convolution primitive for fixed shapes and layouts.

    ``x``, ``W`` and ``y`` are the (N, C, H, W), (O, C, kh, kw) and
    (N, O, Ho, Wo) arrays of the propagation, in any strides.
    """

    def __init__(self, propagation, x, W, y, stride, pad_l, pad_r,
                 channels_last):
        _ensure_engine()
        prop, specs = _PROPAGATIONS[propagation]
        user = [_md_of(*_layout(a)) for a in (x, W, y)]
        geometry = (_Dims(*stride), _Dims(0, 0), _Dims(*pad_l),
                    _Dims(*pad_r))
        # The primitive picks the weights' layout, and the activations'
        # unless they are to be channels-last; the caller's layouts are
        # reordered into them where they differ.
        pd = _descriptor(prop, [
            _md_of(x.shape, _channels_last_strides(x.shape)
                   if channels_last else None),
            _md_of(W.shape),
            _md_of(y.shape, _channels_last_strides(y.shape)
                   if channels_last else None)], geometry)
        self.operands = [_Operand(arg, md, pd, query, is_output)
                         for (arg, query, is_output), md in zip(specs, user)]
        self.primitive = _primitive(pd, 'convolution')

    def __call__(self, x, W, y, scope):
        args = [(operand.arg, operand.bind(array, scope))
                for operand, array in zip(self.operands, (x, W, y))]
        _execute(self.primitive, args, 'convolution')
        scope.finish()


_primitives = {}
#: The operand (0: x, 1: W, 2: y) each propagation writes.
_WRITES = {'forward': 2, 'backward_data': 0, 'backward_weights': 1}


def convolution(propagations, stride, pad, kept=None, channels_last=False):
    """Run propagations of one float32 2-D convolution, in place.

    ``propagations`` is a list of ``(propagation, x, W, y)``: ``'forward'``
    writes ``y``; ``'backward_data'`` writes ``x``, the input gradient, from
    ``y``, the output gradient; ``'backward_weights'`` writes ``W``. An
    input that several of them read in the same layout (the output gradient
    of the two backward propagations) is reordered once. ``kept``, a list,
    carries copies from call to call: the reordered ``x`` of a
    ``'forward'`` is added to it, and a later ``'backward_weights'`` given
    the same list reads that copy instead of reordering ``x`` again.
    ``stride`` and ``pad`` are (y, x) pairs; the padding after the input
    follows from the shapes. With ``channels_last`` the primitives take
    their activations stored as (N, H, W, C), else in the blocked layout
    they choose.
    """
    with _Scope(kept or ()) as scope:
        for propagation, x, W, y in propagations:
            # oneDNN describes no negative stride (a flipped view): such an
            # operand is read from a contiguous copy, or written to one
            # that is copied back
            arrays = [x, W, y]
            written = _WRITES[propagation]
            backs = []
            for i, a in enumerate(arrays):
                if any(step < 0 for step in a.strides):
                    arrays[i] = numpy.ascontiguousarray(a)
                    if i == written:
                        backs.append((a, arrays[i]))
            x, W, y = arrays
            key = (propagation, _layout(x), _layout(W), _layout(y), stride,
                   pad, channels_last)
            primitive = _primitives.get(key)
            if primitive is None:
                pad_r = tuple((o - 1) * s + k - i - p for o, s, k, i, p in zip(
                    y.shape[2:], stride, W.shape[2:], x.shape[2:], pad))
                primitive = _primitives[key] = _Convolution(
                    propagation, x, W, y, stride, pad, pad_r, channels_last)
            primitive(x, W, y, scope)
            for original, copy in backs:
                original[...] = copy
            if propagation == 'forward' and kept is not None:
                kept.extend(c for c in scope.reordered if c[0] is x)
