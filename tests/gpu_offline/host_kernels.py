"""CUDA kernel source compiled as C++ and run on the host, on NumPy arrays.

The prelude maps CUDA's built-ins to host code: each launch runs its grid's
blocks one after another with one thread per block (``blockDim.x = 1``), so
grid-stride loops, table look-ups, atomics and stores run as written, and a
block's shared-memory reduction has a single value. float16 conversions are
F16C's, which round to nearest even as the PTX ``cvt.rn`` does.
"""
import ctypes
import os
import re
import subprocess

import numpy

PRELUDE = r'''
#include <cmath>
#include <cstring>
#include <immintrin.h>
#define SEGMENTED_ON_HOST 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads()
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, blockDim, gridDim;
using std::isfinite;
static inline float __int_as_float(int i) {
    float f; memcpy(&f, &i, 4); return f;
}
static inline int __float_as_int(float f) {
    int i; memcpy(&i, &f, 4); return i;
}
static inline int atomicMax(int *a, int v) {
    int o = *a; if (v > o) *a = v; return o;
}
static inline unsigned long long atomicAdd(unsigned long long *a,
                                           unsigned long long v) {
    unsigned long long o = *a; *a += v; return o;
}
static inline float to_float(unsigned short h) { return _cvtsh_ss(h); }
static inline unsigned short to_half(float f) {
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
'''

EPILOGUE = r'''
extern "C" void set_launch(unsigned gx, unsigned gy, unsigned bx,
                           unsigned by) {
    gridDim.x = gx; gridDim.y = gy; gridDim.z = 1;
    blockDim.x = 1; blockDim.y = 1; blockDim.z = 1;
    threadIdx.x = threadIdx.y = threadIdx.z = 0;
    blockIdx.x = bx; blockIdx.y = by; blockIdx.z = 0;
}
'''


#: The NumPy scalar each C type of a kernel parameter takes by value: what
#: CuPy's RawKernel must be given, since it passes a scalar at its own
#: dtype's width.
SCALAR_TYPES = {'int': numpy.int32, 'int64': numpy.int64,
                'long long': numpy.int64, 'float': numpy.float32,
                'unsigned long long': numpy.uint64}


def kernel_parameters(source):
    """``{name: [dtype, or None for a pointer, ...]}`` of every
    ``extern "C" __global__`` function of ``source``."""
    kernels = {}
    for name, params in re.findall(
            r'extern "C" __global__ void (\w+)\(([^)]*)\)', source):
        kinds = []
        for param in params.split(','):
            words = param.replace('const', ' ').split()
            if '*' in param:
                kinds.append(None)
            else:
                kinds.append(SCALAR_TYPES[' '.join(words[:-1])])
        kernels[name] = kinds
    return kernels


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
    every launch is checked against the kernel's C signature."""

    def __init__(self, source, folder):
        self.parameters = kernel_parameters(source)
        path = os.path.join(str(folder), 'kernels')
        with open(path + '.cpp', 'w') as f:
            f.write(PRELUDE + source + EPILOGUE)
        subprocess.run(['g++', '-O1', '-mf16c', '-ffp-contract=off',
                        '-shared', '-fPIC', '-o', path + '.so',
                        path + '.cpp'], check=True, capture_output=True)
        self.library = ctypes.CDLL(path + '.so')

    def launch(self, name, grid, args):
        """Run kernel ``name`` over ``grid`` (a tuple of 1 or 2 block
        counts); ``args``: NumPy arrays (passed by address) and NumPy
        scalars (by value), as CuPy's RawKernel takes them."""
        check_arguments(name, self.parameters[name], args)
        kernel = getattr(self.library, name)
        kernel.restype = None
        values = [ctypes.c_void_p(a.ctypes.data)
                  if isinstance(a, numpy.ndarray)
                  else numpy.ctypeslib.as_ctypes(numpy.array(a))
                  for a in args]
        gx, gy = (tuple(grid) + (1,))[:2]
        for by in range(gy):
            for bx in range(gx):
                self.library.set_launch(gx, gy, bx, by)
                kernel(*values)


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
