"""The GPU path against the installed CuPy, NCCL and ChainerMN, with no GPU:
every kernel built by CuPy and compiled by NVRTC for the architectures the
docs name, and every name the GPU modules read resolved.

Runs where CuPy imports (``make test-gpu-offline``: CuPy 13 and CuPy 14
venvs); elsewhere it is skipped, unless ``REQUIRE_CUPY=1`` makes a missing
CuPy a failure.
"""
import ast
import glob
import importlib
import inspect
import os
import re
import subprocess
import sys

import numpy
import pytest

from conftest import REPO
import communicators
from largebatch import cuda_stack
import kernels
from host_kernels import elementwise_source

cuda_stack.preload()
try:
    import cupy
    from cupy_backends.cuda.libs import nvrtc
except ImportError as e:  # the CPU venv
    if os.environ.get('REQUIRE_CUPY') == '1':
        raise
    pytest.skip('no CuPy ({}): make test-gpu-offline runs these'.format(e),
                allow_module_level=True)


def compile_ptx(source, name, options):
    """NVRTC's PTX of ``source``, or its log in the failure."""
    program = nvrtc.createProgram(source, name + '.cu', [], [])
    try:
        try:
            nvrtc.compileProgram(program, list(options))
        except nvrtc.NVRTCError:
            pytest.fail('{}: NVRTC failed with {}:\n{}'.format(
                name, options, nvrtc.getProgramLog(program)))
        ptx = nvrtc.getPTX(program)
    finally:
        nvrtc.destroyProgram(program)
    return ptx.decode() if isinstance(ptx, bytes) else ptx


@pytest.mark.parametrize('module, spec', kernels.elementwise())
def test_cupy_builds_every_elementwise_kernel(module, spec):
    kernel = cupy.ElementwiseKernel(*spec)
    assert kernel.name == spec[3]


@pytest.mark.parametrize('arch', kernels.ARCHITECTURES)
def test_every_kernel_compiles_for_the_architectures(arch):
    if arch not in nvrtc.getSupportedArchs():
        # CUDA 13 (CuPy 14's) dropped Pascal and Volta; CUDA 12 has them
        assert arch < 75 and nvrtc.getVersion()[0] >= 13, arch
        pytest.skip('CUDA {}.{} has no compute_{} (docs/gpu.md)'.format(
            *nvrtc.getVersion(), arch))
    # with the option CuPy adds to every kernel's
    target = ('-ftz=true', '--gpu-architecture=compute_{}'.format(arch))
    for module, source, options, names in kernels.raw():
        ptx = compile_ptx(source, module, tuple(options) + target)
        for name in names:
            assert '.entry {}('.format(name) in ptx, (module, name)
        assert not rounded_otherwise_than_numpy(ptx), module
    for module, spec in kernels.elementwise():
        for ctype in ('float', 'double'):
            ptx = compile_ptx(elementwise_source(spec, ctype, device=True),
                              spec[3], cuda_stack.KERNEL_OPTIONS + target)
            assert '.entry {}('.format(spec[3]) in ptx
            assert not rounded_otherwise_than_numpy(ptx), (spec[3], ctype)


def rounded_otherwise_than_numpy(ptx):
    """The PTX instructions that round otherwise than NumPy's float
    operations (docs/gpu.md, "Rounding"): a fused multiply-add, and an
    approximate division, reciprocal or square root."""
    return re.findall(r'\b(?:fma|mad)\.\w[\w.]*|\b(?:div|rcp|sqrt)\.'
                      r'(?:approx|full)[\w.]*', ptx)


def test_without_the_options_nvrtc_contracts_into_fma():
    """What ``--fmad=false`` prevents: NVRTC's default fuses the weight
    decay's ``g += rate * p`` into one rounding."""
    from optimizers.weight_decay import WEIGHT_DECAY_KERNEL
    source = elementwise_source(WEIGHT_DECAY_KERNEL, 'float', device=True)
    target = ('-ftz=true', '--gpu-architecture=compute_90')
    assert rounded_otherwise_than_numpy(compile_ptx(
        source, 'weight_decay', target)) == ['fma.rn.ftz.f32']
    assert rounded_otherwise_than_numpy(compile_ptx(
        source, 'weight_decay', cuda_stack.KERNEL_OPTIONS + target)) == []


#: The packages whose names the GPU modules may read.
ROOTS = ('cupy', 'cupy_backends', 'chainermn', 'chainer.backends.cuda')
#: Names read only where cuDNN is loaded (under ``cuda.cudnn_enabled``):
#: neither offline stack has cuDNN, and CuPy 14 has no cuDNN module.
WITH_CUDNN_ONLY = ('chainer.backends.cuda.cuda.cudnn',)


def imported_names(tree):
    """``{local name: dotted module path}`` of every import in ``tree``
    (at any depth: the GPU modules import CuPy inside functions)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split('.')[0]] = (
                    alias.name if alias.asname else alias.name.split('.')[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = '{}.{}'.format(
                    node.module, alias.name)
    return names


def dotted_reads(tree, names):
    """Every ``a.b.c`` that starts at an imported name under ``ROOTS``."""
    reads = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in names:
            path = names[node.id]
            if path.startswith(ROOTS) or path.split('.')[0] in ROOTS:
                reads.add('.'.join([path] + parts[::-1]))
    for path in names.values():
        if path.startswith(ROOTS):
            reads.add(path)
    return reads


def resolve(path):
    """Import the longest module prefix of ``path``, then getattr the
    rest; AttributeError or ImportError where a name is missing."""
    parts = path.split('.')
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module('.'.join(parts[:cut]))
        except ImportError:
            if cut == 1:
                raise
            continue
        for part in parts[cut:]:
            value = getattr(value, part)
        return value


@pytest.mark.parametrize('module', kernels.GPU_MODULES)
def test_every_name_a_gpu_module_reads_exists(module):
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    missing = []
    for path in sorted(dotted_reads(tree, imported_names(tree))):
        if path.startswith(WITH_CUDNN_ONLY):
            continue
        try:
            resolve(path)
        except (AttributeError, ImportError) as e:
            missing.append('{} ({})'.format(path, e))
    assert not missing, missing


def test_the_communicator_has_what_the_all_reduce_uses():
    from mpi4py import MPI
    from communicators.pure_nccl_fp16_communicator import \
        PureNcclFp16Communicator
    comm = PureNcclFp16Communicator(MPI.COMM_SELF)
    assert comm.nccl_comm is None and callable(comm._init_comms)
    for name in ('assign', 'array', 'ptr'):
        assert callable(getattr(comm.gpu_buffer_b, name))
    for name in ('allReduce', 'bcast'):
        assert callable(getattr(cupy.cuda.nccl.NcclCommunicator, name))


def chainermn_pack_kernels():
    """``(name, CUDA source)`` of ChainerMN's batched pack kernels."""
    from chainermn.communicators import _memory_utility
    return [(f.__name__, re.search(r"r\'\'\'(.*?)\'\'\'",
                                   inspect.getsource(f), re.S).group(1))
            for f in (_memory_utility._cupy_batched_pack_params,
                      _memory_utility._cupy_batched_unpack_params)]


def compiles(source, name):
    """Whether NVRTC compiles ``source`` with CuPy's headers and those of
    the CUDA wheels, as CuPy compiles a raw kernel."""
    header = cupy._core.core._get_header_dir_path()
    site = os.path.dirname(os.path.dirname(cupy.__file__))
    folders = ([header] + glob.glob(os.path.join(header, 'cupy', '_cccl', '*'))
               + glob.glob(os.path.join(site, 'nvidia', '*', 'include')))
    program = nvrtc.createProgram(source, name + '.cu', [], [])
    try:
        nvrtc.compileProgram(program, ['-I' + f for f in folders] + [
            '-ftz=true', '--std=c++17', '--gpu-architecture=compute_80'])
        return True
    except nvrtc.NVRTCError:
        return False
    finally:
        nvrtc.destroyProgram(program)


@pytest.mark.parametrize('name', ['pure_nccl', 'non_cuda_aware'])
def test_chainermn_nccl_communicators_pack_as_this_cupy_allows(name):
    """ChainerMN's batched pack kernels are used where they compile (CuPy
    13; CuPy 14's headers lack their type ``half``); ``pure_nccl`` sums in
    float32 whatever ``chainer.get_dtype()`` says."""
    from mpi4py import MPI
    comm = communicators.create_communicator(name, 'float32', MPI.COMM_SELF,
                                             gpu=True)
    kernels_compile = all(compiles(source, kernel)
                          for kernel, source in chainermn_pack_kernels())
    assert comm.batched_copy == kernels_compile
    if name == 'pure_nccl':
        assert comm.allreduce_grad_dtype == numpy.float32
    if kernels_compile:
        communicators.create_communicator(name, 'float32', MPI.COMM_SELF,
                                          gpu=True, dtype='mixed16')
    else:  # the per-array copy casts float16 gradients with copy=False
        line = r'^communicator .{}. cannot unpack float16 gradients on ' \
            r'CuPy 14'.format(name)
        with pytest.raises(ValueError, match=line):
            communicators.create_communicator(
                name, 'float32', MPI.COMM_SELF, gpu=True, dtype='mixed16')


def test_cupys_out_of_memory_is_a_memory_error():
    """``imagenet_job.endings.ending_the_job`` and eval_imagenet.py catch
    MemoryError, so that a GPU out of memory ends with one line as a CPU one
    does."""
    assert issubclass(cupy.cuda.memory.OutOfMemoryError, MemoryError)
    error = cupy.cuda.memory.OutOfMemoryError(1 << 30, 79 << 30)
    assert str(error).startswith('Out of memory allocating 1,073,741,824 '
                                 'bytes')


#: A process whose NCCL binding cannot be loaded, as where libnccl.so.2 is
#: missing: the import of CuPy's binding fails, as the loader would fail it.
WITHOUT_NCCL = """
import importlib.abc, sys
class NoNccl(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == 'cupy_backends.cuda.libs.nccl':
            raise ImportError('libnccl.so.2: cannot open shared object file: '
                              'No such file or directory')
sys.meta_path.insert(0, NoNccl())
from largebatch import cuda_stack
from cupy.cuda import nccl
print(nccl.available)
print(cuda_stack._library_error(cuda_stack._nccl_error()))
"""


def test_a_missing_nccl_is_found_although_cupy_hides_it():
    """``cupy.cuda.nccl`` imports without NCCL (``available`` False): the
    check must not take the import for the library."""
    proc = subprocess.run([sys.executable, '-W', 'ignore', '-c',
                           WITHOUT_NCCL], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [
        'False', 'libnccl.so.2 cannot be loaded (libnccl.so.2: cannot open '
        'shared object file: No such file or directory)']
    assert cuda_stack._nccl_error() is None  # this venv's NCCL loads


#: The start-up check in a process without NVRTC, on a machine whose one GPU
#: the device count stands in for: CuPy 13 finds libnvrtc.so.12 only where
#: cuda_stack preloads it, CuPy 14 through cuda-pathfinder, which here finds
#: none.
WITHOUT_NVRTC = """
from largebatch import chainer_compat
from largebatch import cuda_stack
try:
    from cuda import pathfinder
except ImportError:  # CuPy 13
    pathfinder = None
if pathfinder:
    found = pathfinder.load_nvidia_dynamic_lib
    def load_nvidia_dynamic_lib(name):
        if name == 'nvrtc':
            raise pathfinder.DynamicLibNotFoundError(
                'Failure finding "libnvrtc.so*": not in site-packages')
        return found(name)
    pathfinder.load_nvidia_dynamic_lib = load_nvidia_dynamic_lib
cuda_stack.LIBRARIES = tuple(
    (package, names) for package, names in cuda_stack.LIBRARIES
    if package != 'cuda_nvrtc')
cuda_stack.preload()
cuda_stack._device_count = lambda: (1, None)
try:
    cuda_stack.check(allow_no_cudnn=True, need_nccl=False)
except cuda_stack.InputError as e:
    print(e)
"""


def test_the_check_names_a_missing_nvrtc_before_any_kernel():
    """Without NVRTC, CuPy imports and Chainer says CUDA is available, and
    the first kernel would fail with a traceback on every rank: the check
    compiles one first and names the library and its wheel."""
    proc = subprocess.run([sys.executable, '-W', 'ignore', '-c',
                           WITHOUT_NVRTC], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = cuda_stack.NVRTC_WHEELS[cuda_stack.cupy_distribution()[0]]
    assert re.match(
        r"NVRTC, the CUDA compiler of every CuPy kernel, cannot be loaded "
        r"\(\w+: .*libnvrtc\.so.*\); pip install '{}'$".format(
            re.escape(wheel)), proc.stdout), proc.stdout
