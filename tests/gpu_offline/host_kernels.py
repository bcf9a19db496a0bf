"""CUDA kernel source compiled as C++ and run on the host, on NumPy arrays.

The prelude maps CUDA's built-ins to host code: each launch runs its grid's
blocks one after another. A kernel that synchronizes its block
(``__syncthreads``) runs each block as ``threads`` host threads, with
``__shared__`` arrays shared among them, a barrier for ``__syncthreads`` and
real atomics, so its shared-memory reduction runs as on the GPU; every other
kernel runs one thread per block (``blockDim.x = 1``), where grid-stride
loops, table look-ups, atomics and stores run as written. float16
conversions are F16C's, which round to nearest even as the PTX ``cvt.rn``
does.
"""
import ctypes
import os
import re
import subprocess

import numpy

PRELUDE = r'''
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>
#include <immintrin.h>
#define SEGMENTED_ON_HOST 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() block_barrier->arrive_and_wait()
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, blockDim, gridDim;
static thread_local Dim3 threadIdx;
static std::barrier<> *block_barrier;
using std::isfinite;
static inline float __int_as_float(int i) {
    float f; memcpy(&f, &i, 4); return f;
}
static inline int __float_as_int(float f) {
    int i; memcpy(&i, &f, 4); return i;
}
static inline int atomicMax(int *a, int v) {
    int o = __atomic_load_n(a, __ATOMIC_SEQ_CST);
    while (v > o && !__atomic_compare_exchange_n(
               a, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return o;
}
static inline unsigned long long atomicAdd(unsigned long long *a,
                                           unsigned long long v) {
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);
}
static inline float to_float(unsigned short h) { return _cvtsh_ss(h); }
static inline unsigned short to_half(float f) {
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
'''

#: Each kernel's launch on the host: its grid's blocks in turn, each as
#: ``threads`` host threads (PARAMS: the kernel's parameters, ARGS: their
#: names).
LAUNCH = r'''
extern "C" void host_NAME(unsigned gx, unsigned gy, unsigned threads,
                          PARAMS) {
    gridDim = {gx, gy, 1};
    blockDim = {threads, 1, 1};
    std::barrier<> sync(threads);
    block_barrier = &sync;
    for (unsigned by = 0; by < gy; ++by) {
        for (unsigned bx = 0; bx < gx; ++bx) {
            blockIdx = {bx, by, 0};
            std::vector<std::thread> pool;
            for (unsigned x = 0; x < threads; ++x) {
                pool.emplace_back([=] { threadIdx = {x, 0, 0}; NAME(ARGS); });
            }
            for (auto &thread : pool) thread.join();
        }
    }
}
'''


#: The NumPy scalar each C type of a kernel parameter takes by value: what
#: CuPy's RawKernel must be given, since it passes a scalar at its own
#: dtype's width.
SCALAR_TYPES = {'int': numpy.int32, 'int64': numpy.int64,
                'long long': numpy.int64, 'float': numpy.float32,
                'unsigned long long': numpy.uint64}


def kernels_of(source):
    """``[(name, parameter list, body), ...]`` of every ``extern "C"
    __global__`` function of ``source``, the body up to the next one."""
    found = list(re.finditer(
        r'extern "C" __global__ void (\w+)\(([^)]*)\)', source))
    ends = [match.start() for match in found[1:]] + [len(source)]
    return [(match.group(1), match.group(2), source[match.end():end])
            for match, end in zip(found, ends)]


def kernel_parameters(source):
    """``{name: [dtype, or None for a pointer, ...]}`` of every
    ``extern "C" __global__`` function of ``source``."""
    kernels = {}
    for name, params, _ in kernels_of(source):
        kinds = []
        for param in params.split(','):
            words = param.replace('const', ' ').split()
            if '*' in param:
                kinds.append(None)
            else:
                kinds.append(SCALAR_TYPES[' '.join(words[:-1])])
        kernels[name] = kinds
    return kernels


def launch_source(name, params):
    """C++ of ``host_<name>``: :data:`LAUNCH` for kernel ``name``."""
    names = [param.split()[-1].lstrip('*') for param in params.split(',')]
    return (LAUNCH.replace('NAME', name).replace('PARAMS', params)
            .replace('ARGS', ', '.join(names)))


def check_arguments(name, kinds, args):
    """TypeError unless ``args`` are what kernel ``name``'s parameters
    ``kinds`` take: an array for a pointer, a scalar of the C type's width
    for a value."""
    if len(args) != len(kinds):
        raise TypeError('{} takes {} arguments, got {}'.format(
            name, len(kinds), len(args)))
    for i, (kind, arg) in enumerate(zip(kinds, args)):
        if kind is None:
            if not isinstance(arg, numpy.ndarray):
                raise TypeError('{}: argument {} takes an array (a '
                                'pointer), got {}'.format(name, i, arg))
        elif isinstance(arg, numpy.ndarray) or \
                numpy.asarray(arg).dtype != kind:
            raise TypeError('{}: argument {} takes {}, got {} ({})'.format(
                name, i, numpy.dtype(kind), arg,
                numpy.asarray(arg).dtype))


class HostKernels(object):
    """The kernels of ``source`` as a shared library built in ``folder``;
    every launch is checked against the kernel's C signature. A kernel
    that calls ``__syncthreads`` runs ``threads`` host threads per block
    (the GPU's block size), the others one."""

    def __init__(self, source, folder, threads):
        self.parameters = kernel_parameters(source)
        self.threads = {name: threads if '__syncthreads' in body else 1
                        for name, _, body in kernels_of(source)}
        path = os.path.join(str(folder), 'kernels')
        with open(path + '.cpp', 'w') as f:
            f.write(PRELUDE + source + ''.join(
                launch_source(name, params)
                for name, params, _ in kernels_of(source)))
        subprocess.run(['g++', '-std=c++20', '-pthread', '-O1', '-mf16c',
                        '-ffp-contract=off', '-shared', '-fPIC', '-o',
                        path + '.so', path + '.cpp'], check=True,
                       capture_output=True)
        self.library = ctypes.CDLL(path + '.so')

    def launch(self, name, grid, args):
        """Run kernel ``name`` over ``grid`` (a tuple of 1 or 2 block
        counts); ``args``: NumPy arrays (passed by address) and NumPy
        scalars (by value), as CuPy's RawKernel takes them."""
        check_arguments(name, self.parameters[name], args)
        kernel = getattr(self.library, 'host_' + name)
        kernel.restype = None
        values = [ctypes.c_void_p(a.ctypes.data)
                  if isinstance(a, numpy.ndarray)
                  else numpy.ctypeslib.as_ctypes(numpy.array(a))
                  for a in args]
        gx, gy = (tuple(grid) + (1,))[:2]
        kernel(ctypes.c_uint(gx), ctypes.c_uint(gy),
               ctypes.c_uint(self.threads[name]), *values)


def parameters(spec):
    """``(type, name, is_output)`` of an ElementwiseKernel's arguments
    (``cuda.elementwise``'s in_params, out_params, operation, name)."""
    result = []
    for params, output in ((spec[0], False), (spec[1], True)):
        for param in params.split(','):
            words = param.split()
            if 'raw' in words:
                raise ValueError('raw arguments are not emulated: ' + param)
            result.append((words[-2], words[-1], output))
    return result


def elementwise_source(spec, ctype, device):
    """C++ (``device`` False) or CUDA source of ElementwiseKernel ``spec``
    with its type ``T`` as ``ctype``: element ``i`` of every argument bound
    by reference, then the operation and a semicolon, as CuPy's generated
    kernel has them.
    The host function takes the element count and an array of pointers."""
    head = '{} void {}('.format(
        'extern "C" __global__' if device else 'extern "C"', spec[3])
    lines = ['typedef {} T;'.format(ctype)]
    types = {'T': 'T', 'float32': 'float', 'float64': 'double',
             'int32': 'int', 'int64': 'long long'}
    if device:
        args = ', '.join('{}* _{}'.format(types[t], name)
                         for t, name, _ in parameters(spec))
        lines += [head + 'long long _n, ' + args + ') {',
                  '  long long i = (long long)blockIdx.x * blockDim.x'
                  ' + threadIdx.x;',
                  '  if (i >= _n) return;']
        pointer = '_{}[i]'
    else:
        lines += ['#include <cmath>', 'using std::sqrt;',
                  head + 'long long _n, void **_args) {',
                  '  for (long long i = 0; i < _n; ++i) {']
        pointer = '(({}*)_args[{}])[i]'
    for index, (t, name, output) in enumerate(parameters(spec)):
        ref = (pointer.format(name) if device
               else pointer.format(types[t], index))
        lines.append('  {}{} &{} = {};'.format(
            '' if output else 'const ', types[t], name, ref))
    lines += ['  ' + spec[2] + ';'] + (['}'] if device else ['  }', '}'])
    return '\n'.join(lines) + '\n'


class HostElementwise(object):
    """ElementwiseKernel ``spec`` with ``T = float``, built in ``folder``;
    called with NumPy arrays of one size (scalars broadcast by the
    caller), in the order of the kernel's arguments."""

    def __init__(self, spec, folder):
        path = os.path.join(str(folder), spec[3])
        with open(path + '.cpp', 'w') as f:
            f.write(elementwise_source(spec, 'float', device=False))
        subprocess.run(['g++', '-O1', '-ffp-contract=off', '-shared',
                        '-fPIC', '-o', path + '.so', path + '.cpp'],
                       check=True, capture_output=True)
        self.function = getattr(ctypes.CDLL(path + '.so'), spec[3])
        self.function.restype = None

    def __call__(self, *arrays):
        pointers = (ctypes.c_void_p * len(arrays))(
            *[a.ctypes.data for a in arrays])
        self.function(ctypes.c_longlong(arrays[0].size), pointers)
