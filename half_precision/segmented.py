"""One kernel launch over many arrays: a table of their addresses and sizes.

ResNet-50 has 161 parameter arrays. A kernel per array costs a launch each
(8 to 15 us of host time), so a float16 all-reduce written array by array
launches about 500 kernels per update. ChainerMN's batched pack copies all
gradients in one kernel over a table of pointers; the kernels here do the
same for the float16 all-reduce's steps, each once per update whatever the
number of arrays:

    max_abs       m_s = max_k |a_s[k]|   (inf where a_s holds inf or NaN)
    scale_pack    h[o_s + k] = half(a_s[k] * scale_s)
    unpack        a_s[k] = h[o_s + k] * inverse_s
    round         a_s[k] = half(a_s[k] * scale_s) * inverse_s
    accumulate    d_s[k] += a_s[k]        (d_s float32)
    divide        d_s[k] = a_s[k] / divisor  (a_s float32)
    non_finite    the number of inf or NaN elements of h

Arrays are C-contiguous, float32 or float16 (a table may mix them: under
``chainer.mixed16`` the weights are float16 and the normalization
parameters float32); a float16 result is rounded to nearest even, as
NumPy's ``astype`` rounds. Element ``j`` of the packed order belongs to the
array ``s`` with ``o_s <= j < o_{s+1}``, ``o`` the running sum of the sizes
(:func:`offsets`, which the CPU communicator packs by as well).

The CUDA source (:data:`SOURCE`) needs no header: float16 conversions are
the PTX ``cvt`` instructions, so NVRTC compiles it anywhere, with or without
a GPU. Contraction to FMA is off, as in the CPU kernels. CuPy compiles
every kernel with ``-ftz=true``, which flushes float32 values below 2^-126
to zero where NumPy keeps them subnormal; of these kernels' results only
unpack's can differ from the CPU path's by it: an input that small, scaled
by at most 2^100 (:mod:`half_precision.scaling`), rounds to float16 zero
either way, and a product ``h * inverse_s`` falls below 2^-126 only under a
scale above 2^102 / p, a parameter whose gradients are all below about
2^-86 / p: zero on the GPU, subnormal on the CPU. With
``SEGMENTED_ON_HOST`` defined it leaves the two conversions to the includer,
which is how the test suite compiles the same kernels as C++ and runs them
on NumPy arrays against the CPU path (tests/gpu_offline).
"""
import numpy

#: Threads per block of every kernel; ``max_abs``'s reduction assumes it.
THREADS = 256
#: Blocks of a grid-stride kernel at most, and blocks per array of max_abs.
MAX_BLOCKS = 4096
MAX_ABS_BLOCKS_PER_ARRAY = 16
#: NVRTC options of :data:`SOURCE`.
OPTIONS = ('--std=c++11', '--fmad=false')

SOURCE = r'''
typedef unsigned short half_bits;
typedef long long int64;

#ifndef SEGMENTED_ON_HOST
__device__ __forceinline__ float to_float(half_bits h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ half_bits to_half(float f) {
    half_bits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#endif

/* The table: n addresses, n float16 flags, n + 1 element offsets. */
struct Table {
    const int64 *t;
    int n;
    __device__ unsigned long long address(int s) const {
        return (unsigned long long)t[s];
    }
    __device__ bool is_half(int s) const { return t[n + s] != 0; }
    __device__ int64 offset(int s) const { return t[2 * n + s]; }
    __device__ int64 total() const { return offset(n); }
    __device__ float load(int s, int64 k) const {
        return is_half(s) ? to_float(((const half_bits *)address(s))[k])
                          : ((const float *)address(s))[k];
    }
    __device__ void store(int s, int64 k, float v) const {
        if (is_half(s)) {
            ((half_bits *)address(s))[k] = to_half(v);
        } else {
            ((float *)address(s))[k] = v;
        }
    }
    /* The array that packed element j belongs to. */
    __device__ int segment(int64 j) const {
        int lo = 0, hi = n - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (offset(mid) <= j) lo = mid; else hi = mid - 1;
        }
        return lo;
    }
};

#define FOR_EACH_ELEMENT(j, total) \
    for (int64 j = (int64)blockIdx.x * blockDim.x + threadIdx.x; \
         j < (total); j += (int64)gridDim.x * blockDim.x)

/* f(s, k, j) for each element j of the packed order of table, element k
   of its array s, over a grid-stride loop. */
template <typename F>
__device__ __forceinline__ void for_each_segment_element(const Table &table,
                                                         F f) {
    FOR_EACH_ELEMENT(j, table.total()) {
        int s = table.segment(j);
        f(s, j - table.offset(s), j);
    }
}

/* grid (n, blocks per array); maxima zeroed before: non-negative floats
   order as their bits do, so an integer atomicMax takes the float max. */
extern "C" __global__ void segmented_max_abs(const int64 *t, int n,
                                             float *maxima) {
    Table table = {t, n};
    int s = blockIdx.x;
    int64 size = table.offset(s + 1) - table.offset(s);
    float m = 0.f;
    for (int64 k = (int64)blockIdx.y * blockDim.x + threadIdx.x; k < size;
         k += (int64)gridDim.y * blockDim.x) {
        float v = table.load(s, k);
        m = fmaxf(m, isfinite(v) ? fabsf(v) : __int_as_float(0x7f800000));
    }
    __shared__ float part[256];
    part[threadIdx.x] = m;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) {
            part[threadIdx.x] = fmaxf(part[threadIdx.x],
                                      part[threadIdx.x + w]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicMax((int *)&maxima[s], __float_as_int(part[0]));
    }
}

extern "C" __global__ void segmented_scale_pack(const int64 *t, int n,
                                                const float *scales,
                                                half_bits *packed) {
    Table table = {t, n};
    for_each_segment_element(table, [&](int s, int64 k, int64 j) {
        packed[j] = to_half(table.load(s, k) * scales[s]);
    });
}

extern "C" __global__ void segmented_unpack(const int64 *t, int n,
                                            const float *inverses,
                                            const half_bits *packed) {
    Table table = {t, n};
    for_each_segment_element(table, [&](int s, int64 k, int64 j) {
        table.store(s, k, to_float(packed[j]) * inverses[s]);
    });
}

extern "C" __global__ void segmented_round(const int64 *t, int n,
                                           const float *scales,
                                           const float *inverses) {
    Table table = {t, n};
    for_each_segment_element(table, [&](int s, int64 k, int64) {
        table.store(s, k, to_float(to_half(table.load(s, k) * scales[s]))
                          * inverses[s]);
    });
}

/* source table t (n arrays), destination table d (n float32 arrays). */
extern "C" __global__ void segmented_accumulate(const int64 *t,
                                                const int64 *d, int n) {
    Table source = {t, n}, sums = {d, n};
    for_each_segment_element(source, [&](int s, int64 k, int64) {
        sums.store(s, k, sums.load(s, k) + source.load(s, k));
    });
}

/* source table t (n float32 arrays), destination table d (n arrays). */
extern "C" __global__ void segmented_divide(const int64 *t, const int64 *d,
                                            int n, float divisor) {
    Table source = {t, n}, quotients = {d, n};
    for_each_segment_element(source, [&](int s, int64 k, int64) {
        quotients.store(s, k, source.load(s, k) / divisor);
    });
}

extern "C" __global__ void count_non_finite(const half_bits *h, int64 size,
                                            unsigned long long *count) {
    unsigned long long mine = 0;
    FOR_EACH_ELEMENT(j, size) {
        mine += (h[j] & 0x7fff) >= 0x7c00;
    }
    if (mine) atomicAdd(count, mine);
}
'''

#: The kernels of :data:`SOURCE`.
KERNELS = ('segmented_max_abs', 'segmented_scale_pack', 'segmented_unpack',
           'segmented_round', 'segmented_accumulate', 'segmented_divide',
           'count_non_finite')


def offsets(arrays):
    """int64 ``[0, n_0, n_0 + n_1, ...]``: where each array starts in the
    packed order, and the total at the end."""
    return numpy.concatenate(
        [[0], numpy.cumsum([a.size for a in arrays], dtype=numpy.int64)]
    ).astype(numpy.int64)


def address(a):
    """The device (CuPy) or host (NumPy) address of array ``a``: what NCCL
    and the kernels' tables take."""
    ptr = getattr(a.data, 'ptr', None)
    return a.ctypes.data if ptr is None else ptr


def table(arrays):
    """The table of ``arrays`` as a host int64 array: their addresses, their
    float16 flags and :func:`offsets`."""
    for a in arrays:
        if a.dtype not in (numpy.float16, numpy.float32):
            raise ValueError('segmented kernels take float16 or float32 '
                             'arrays, got {}'.format(a.dtype))
        if not a.flags.c_contiguous:
            raise ValueError('segmented kernels take C-contiguous arrays')
    return numpy.concatenate([
        numpy.array([address(a) for a in arrays], numpy.uint64).view(
            numpy.int64),
        numpy.array([a.dtype == numpy.float16 for a in arrays], numpy.int64),
        offsets(arrays)])


def blocks(total):
    """Blocks of a grid-stride launch over ``total`` elements."""
    return int(max(1, min(MAX_BLOCKS, -(-int(total) // THREADS))))


_module = None


def launch(name, grid, args):
    """Run kernel ``name`` of :data:`SOURCE` over ``grid`` blocks of
    :data:`THREADS` with ``args`` (CuPy arrays by address, NumPy scalars by
    value); compiled once per process, for the current device."""
    global _module
    if _module is None:
        import cupy
        _module = cupy.RawModule(code=SOURCE, options=OPTIONS)
    _module.get_function(name)(grid, (THREADS,), args)


def _device_table(xp, arrays):
    return xp.asarray(table(arrays)), numpy.int32(len(arrays))


def max_abs(arrays):
    """float32 array of each array's largest magnitude, inf where it holds
    inf or NaN, on the arrays' device."""
    xp = _xp(arrays)
    t, n = _device_table(xp, arrays)
    maxima = xp.zeros(len(arrays), numpy.float32)
    largest = max(a.size for a in arrays)
    per_array = max(1, min(MAX_ABS_BLOCKS_PER_ARRAY, -(-largest // THREADS)))
    launch('segmented_max_abs', (len(arrays), per_array), (t, n, maxima))
    return maxima


def scale_pack(arrays, scales, packed):
    """``packed`` (float16, the arrays' total size) = each array times its
    scale, in the packed order."""
    t, n = _device_table(_xp(arrays), arrays)
    launch('segmented_scale_pack', (blocks(packed.size),),
           (t, n, scales, packed))


def unpack(packed, inverses, arrays):
    """Each array = its part of ``packed`` times its inverse."""
    t, n = _device_table(_xp(arrays), arrays)
    launch('segmented_unpack', (blocks(packed.size),),
           (t, n, inverses, packed))


def round_in_place(arrays, scales, inverses):
    """Each array = half(array * scale) * inverse, in place."""
    t, n = _device_table(_xp(arrays), arrays)
    launch('segmented_round', (blocks(sum(a.size for a in arrays)),),
           (t, n, scales, inverses))


def accumulate(arrays, sums):
    """Each of ``sums`` (float32, the sizes of ``arrays``) += its array."""
    _launch_pairs('segmented_accumulate', arrays, sums, sums)


def divide(sums, quotients, divisor):
    """Each of ``quotients`` (float16 or float32) = its float32 sum /
    ``divisor``, rounded to its dtype."""
    _launch_pairs('segmented_divide', sums, quotients, sums,
                  numpy.float32(divisor))


def _launch_pairs(name, sources, destinations, float32_side, *args):
    """Kernel ``name`` over the tables of ``sources`` and ``destinations``
    (arrays of the same sizes, ``float32_side`` float32)."""
    if any(a.dtype != numpy.float32 for a in float32_side) or [
            a.size for a in sources] != [a.size for a in destinations]:
        raise ValueError('{}: float32 sums and arrays of their sizes, '
                         'expected'.format(name))
    xp = _xp(sources)
    t, n = _device_table(xp, sources)
    d, _ = _device_table(xp, destinations)
    launch(name, (blocks(sum(a.size for a in sources)),), (t, d, n) + args)


def count_non_finite(packed):
    """uint64 0-d array: the inf and NaN elements of float16 ``packed``."""
    xp = _xp([packed])
    count = xp.zeros((), numpy.uint64)
    launch('count_non_finite', (blocks(packed.size),),
           (packed, numpy.int64(packed.size), count))
    return count


def _xp(arrays):
    import chainer
    return chainer.backend.get_array_module(arrays[0])
