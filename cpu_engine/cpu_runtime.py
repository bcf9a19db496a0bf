"""How the CPU fast paths run: allocator settings, threads, the on switch.

:func:`configure` raises glibc's mmap and trim thresholds, so freed
activation buffers stay in the heap instead of being page-faulted in again
every step, and leaves NumPy's BLAS one thread where oneDNN does the
engine's GEMMs. :func:`native_kernels` hands float32 work to the C loops of
``cpu_engine._kernels`` (on oneDNN's OpenMP threads: one pool per step);
elsewhere :func:`parallel_for` and :func:`parallel_blocks` run NumPy on
:func:`num_threads` Python threads. See docs/cpu_performance.md.
"""
import concurrent.futures
import ctypes
import ctypes.util
import os

import chainer
from chainer.backends import intel64
import numpy

from cpu_engine import onednn
from largebatch.errors import InputError

try:
    from cpu_engine import _kernels as kernels
except ImportError:  # not built: no C compiler; NumPy does the work
    kernels = None

# mallopt() parameter numbers from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

_INT_MAX = 2 ** 31 - 1  # mallopt() takes a C int
# Older glibc caps the mmap threshold at HEAP_MAX_SIZE / 2 (32 MB on 64-bit)
# and rejects more; the largest value is tried first.
_MMAP_THRESHOLDS = (_INT_MAX, 32 << 20)
_TOP_PAD = 64 << 20

_configured = None


def configure():
    """Keep large freed buffers in the heap, and the BLAS's threads from
    competing with OpenMP's; returns the applied settings.

    Where oneDNN is loaded, the engine's GEMMs run on the OpenMP threads of
    its convolutions (:func:`cpu_engine.onednn.matmul`), and the GEMMs left
    to NumPy (the fully connected layer) are small: NumPy's BLAS gets one
    thread (``threadpoolctl``, where installed). Its own threads would spin
    for a while after each of its calls, on the cores the OpenMP threads
    need next. Idempotent; the allocator part is a no-op where the C
    library has no ``mallopt`` (non-glibc platforms). Call it once at
    process start, before the first training step.
    """
    global _configured
    if _configured is not None:
        return _configured
    num_threads()  # a bad OMP_NUM_THREADS: one line before training
    settings = {}
    name = ctypes.util.find_library('c')
    libc = ctypes.CDLL(name) if name else None
    mallopt = getattr(libc, 'mallopt', None)
    if mallopt is not None:
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        for value in _MMAP_THRESHOLDS:
            if mallopt(M_MMAP_THRESHOLD, value):
                settings['M_MMAP_THRESHOLD'] = value
                break
        if mallopt(M_TRIM_THRESHOLD, _INT_MAX):
            settings['M_TRIM_THRESHOLD'] = _INT_MAX
        if mallopt(M_TOP_PAD, _TOP_PAD):
            settings['M_TOP_PAD'] = _TOP_PAD
    if onednn.available():
        try:
            import threadpoolctl
        except ImportError:
            pass
        else:
            threadpoolctl.threadpool_limits(1, user_api='blas')
            settings['blas_threads'] = 1
    _configured = settings
    return settings


def num_threads():
    """Worker threads for element-wise kernels: the BLAS thread count.

    ``OMP_NUM_THREADS`` (set to 1 per process under ``mpiexec`` by the
    launchers) wins, read as OpenMP reads it: its first entry, where it
    lists the threads of nested levels (``4,2``); otherwise every core this
    process may run on. :class:`~largebatch.errors.InputError` for a value
    OpenMP would not take either.
    """
    for name in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS'):
        value = os.environ.get(name, '').strip()
        if value:
            first = value.split(',')[0].strip()
            if not first.isdigit() or int(first) < 1:
                raise InputError(
                    '{}={}: expected a positive integer, or a list of them '
                    'for nested levels (OpenMP\'s 4,2)'.format(name, value))
            return int(first)
    return len(os.sched_getaffinity(0))


_pool = None


def parallel_for(fn, n):
    """Run ``fn(lo, hi)`` on contiguous blocks covering ``range(n)``.

    One block per worker thread (:func:`num_threads`), the calling thread
    taking the first; NumPy releases the GIL inside its loops, so blocks of
    array work run on separate cores. Exceptions propagate to the caller.
    """
    global _pool
    threads = min(num_threads(), n)
    if threads <= 1:
        fn(0, n)
        return
    if _pool is None or _pool._max_workers < threads - 1:
        _pool = concurrent.futures.ThreadPoolExecutor(threads - 1)
    bounds = [n * i // threads for i in range(threads + 1)]
    futures = [_pool.submit(fn, lo, hi)
               for lo, hi in zip(bounds[1:-1], bounds[2:])]
    fn(bounds[0], bounds[1])
    for future in futures:
        future.result()


def contiguous(a):
    """``a`` itself when C-contiguous, else a C-contiguous copy made by
    :func:`parallel_for` over its first axis."""
    if a.flags.c_contiguous:
        return a
    out = numpy.empty(a.shape, a.dtype)

    def copy(lo, hi):
        out[lo:hi] = a[lo:hi]
    parallel_for(copy, a.shape[0])
    return out


def fast_paths_enabled():
    """Whether the NumPy fast paths of :mod:`cpu_engine` are on.

    ``chainer.config.cpu_fast_paths`` (default True) turns them off, e.g.
    ``with chainer.using_config('cpu_fast_paths', False):`` to run Chainer's
    own CPU functions for comparison; iDeep, when Chainer is told to use it,
    also takes precedence.
    """
    return (getattr(chainer.config, 'cpu_fast_paths', True)
            and not intel64.should_use_ideep('>=auto'))


def numpy_inputs(*xs):
    """Whether the variables or arrays ``xs`` are all NumPy arrays and the
    fast paths are on: where an operation takes its engine's path."""
    return (all(type(x.array if isinstance(x, chainer.Variable) else x)
                is numpy.ndarray for x in xs)
            and fast_paths_enabled())


# Bytes of one block of rows: a few arrays of it stay in a core's L2 cache.
BLOCK_BYTES = 256 << 10


def parallel_blocks(fn, rows, row_bytes):
    """Run ``fn(rows_slice)`` over L2-sized blocks of whole rows.

    ``range(rows)`` is split over the worker threads as in
    :func:`parallel_for`, and each thread walks its part in blocks of about
    ``BLOCK_BYTES``, so that passes over a block after the first hit cache.
    Work of one block runs on the calling thread alone.
    """
    size = max(1, BLOCK_BYTES // max(1, row_bytes))
    if rows <= size:
        fn(slice(0, rows))
        return

    def run(lo, hi):
        for i in range(lo, hi, size):
            fn(slice(i, min(i + size, hi)))
    parallel_for(run, rows)


def parallel_elementwise(fn, *arrays):
    """Run ``fn(*blocks)`` over L2-sized blocks of same-size NumPy arrays.

    ``fn`` gets 1-D views of the same block of every array and updates them
    in place. When any array is not C-contiguous (no flat view exists), it
    gets the whole arrays instead, on the calling thread.
    """
    if not all(a.flags.c_contiguous for a in arrays):
        fn(*arrays)
        return
    flat = [a.reshape(-1) for a in arrays]

    def run(block):
        fn(*[a[block] for a in flat])
    parallel_blocks(run, flat[0].size, max(a.itemsize for a in flat))


def _flat(a):
    """``a``'s elements as a 1-D view in memory order, or None if not dense."""
    order = numpy.argsort(a.strides)[::-1]
    t = a.transpose(order)
    if not t.flags.c_contiguous:
        return None
    return t.reshape(-1)


def dense_views(out, *arrays):
    """1-D views of ``out`` and ``arrays`` in their one dense memory order,
    for element-wise loops, or None when they do not share one."""
    flats = [_flat(a) for a in (out,) + arrays]
    if any(f is None for f in flats) or any(
            a.strides != out.strides for a in arrays):
        return None
    return flats


def native_kernels(*arrays):
    """The ``cpu_engine._kernels`` module if it can take ``arrays``, else None.

    It takes C-contiguous float32 NumPy arrays only; None also when the
    extension is not built.
    """
    if kernels is not None and all(
            isinstance(a, numpy.ndarray) and a.dtype == numpy.float32
            and a.flags.c_contiguous for a in arrays):
        return kernels
    return None
