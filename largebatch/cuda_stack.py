"""The CUDA 12 stack of GPU runs: pip's CUDA libraries, and a start-up check.

CuPy 13 finds pip's NCCL wheel by itself but not its cuBLAS or cuDNN, and
Chainer then starts with ``cuda.available`` or ``cudnn_enabled`` False
without a word. :func:`preload` loads the libraries of the ``nvidia-*``
wheels (the ``gpu`` extra) into the process first; :func:`check` turns a
stack that cannot train on a GPU into one line. A trainer calls them as::

    from largebatch import cuda_stack
    cuda_stack.preload()            # before chainer (and cupy) is imported

    import chainer
    ...
    if on_gpu:          # imagenet_job.devices.check_gpu_stack: every worker
        cuda_stack.check(allow_no_cudnn, need_nccl, intra_rank)
        gpu = cuda_stack.device_for(intra_rank, cuda_stack.visible_gpus())
        if rank == 0:
            print(cuda_stack.stack_line(gpu))

``python -m largebatch.cuda_stack [--allow-no-cudnn]`` runs the check and
prints the line of GPU 0. See
docs/gpu.md for the two stacks (the ``gpu`` extra: CuPy 13 with cuDNN; the
``gpu-cuda13`` extra: CuPy 14, which has no cuDNN) and the system-CUDA
alternative.
"""
import collections
import ctypes
import glob
import importlib.util
import importlib.metadata
import os
import re
import socket
import sys

from largebatch import chainer_compat
from largebatch.errors import InputError

INSTALL = "pip install -e '.[gpu]'"  # CuPy 13, CUDA 12, cuDNN 8.9, NCCL
# NCCL's wheel for each CUDA major of CuPy's wheels
NCCL_WHEELS = {'cupy-cuda12x': 'nvidia-nccl-cu12==2.20.5',
               'cupy-cuda13x': 'nvidia-nccl-cu13'}
# NVRTC's wheel, and the wheel with CUDA's headers that CuPy 14 compiles
# with (CuPy 13 carries its own), for each CUDA major of CuPy's wheels
NVRTC_WHEELS = {'cupy-cuda12x': 'nvidia-cuda-nvrtc-cu12==12.1.105',
                'cupy-cuda13x': 'cuda-toolkit[nvrtc]==13.*'}
HEADER_WHEELS = {'cupy-cuda12x': 'nvidia-cuda-runtime-cu12==12.1.105',
                 'cupy-cuda13x': 'cuda-toolkit[cudart]==13.*'}

#: The cuDNN that CuPy 13 links: a cuDNN 9 (PyTorch's) cannot stand in.
CUDNN_8 = 'libcudnn.so.8'
# The wheels' libraries in the order they depend on each other: cuDNN's
# sub-libraries need cuBLASLt and each other, and libcudnn.so.8 opens them
# by name, as NVRTC opens its builtins.
LIBRARIES = (
    ('cuda_runtime', ('libcudart.so.12',)),
    ('cuda_nvrtc', ('libnvrtc.so.12', 'libnvrtc-builtins.so.12.*')),
    ('cublas', ('libcublasLt.so.12', 'libcublas.so.12')),
    ('curand', ('libcurand.so.10',)),
    ('cudnn', ('libcudnn_ops_infer.so.8', 'libcudnn_ops_train.so.8',
               'libcudnn_cnn_infer.so.8', 'libcudnn_cnn_train.so.8',
               'libcudnn_adv_infer.so.8', 'libcudnn_adv_train.so.8',
               CUDNN_8)),
    ('nccl', ('libnccl.so.2',)),
)

_loaded = []  # the CDLL handles, kept for the life of the process


def wheel_roots():
    """The ``site-packages/nvidia`` folders, or none where CuPy is absent."""
    if importlib.util.find_spec('cupy') is None:
        return []
    spec = importlib.util.find_spec('nvidia')
    return list(spec.submodule_search_locations) if spec else []


def _wheel_libraries(roots):
    """``(lib folder, file patterns)`` of each wheel present, in order."""
    for root in wheel_roots() if roots is None else roots:
        for package, patterns in LIBRARIES:
            directory = os.path.join(root, package, 'lib')
            if os.path.isdir(directory):
                yield directory, patterns


def library_dirs(roots=None):
    """The wheels' ``lib`` folders: what ``LD_LIBRARY_PATH`` needs for a
    child process that does not preload (see docs/gpu.md)."""
    return [directory for directory, _ in _wheel_libraries(roots)]


def preload(roots=None):
    """Load pip's CUDA libraries with RTLD_GLOBAL; return the paths loaded.

    A later ``dlopen`` of the same library by its soname (CuPy's modules,
    cuDNN's sub-libraries) then finds it loaded. A library that is absent
    or does not load is left to the system's search path, so on a machine
    without the wheels (or without CuPy) this loads nothing. It also sets
    ``CUDA_MODULE_LOADING=LAZY`` unless the variable is set. ``roots``: the
    ``nvidia`` folders, :func:`wheel_roots` by default.
    """
    # CUDA compiles a module's kernels when they are first used, not all at
    # context creation (seconds and hundreds of MB per process on CUDA 12.1;
    # the default from 12.2 on). Read by the driver when CUDA initializes.
    os.environ.setdefault('CUDA_MODULE_LOADING', 'LAZY')
    paths = []
    for directory, patterns in _wheel_libraries(roots):
        for pattern in patterns:
            for path in sorted(glob.glob(os.path.join(directory, pattern))):
                try:
                    _loaded.append(ctypes.CDLL(path, ctypes.RTLD_GLOBAL))
                except OSError:
                    continue
                paths.append(path)
    return paths


def _library_error(error):
    """``'libx.so.N cannot be loaded (...)'`` from an import error's text."""
    text = str(error).strip().splitlines()[-1] if str(error).strip() else ''
    library = re.search(r'lib[\w+-]+\.so[\d.]*', text)
    if library:
        return '{} cannot be loaded ({})'.format(library.group(0), text)
    return '{}: {}'.format(type(error).__name__, text)


def _device_count():
    from chainer.backends import cuda
    try:
        return cuda.cupy.cuda.runtime.getDeviceCount(), None
    except cuda.cupy.cuda.runtime.CUDARuntimeError as e:
        return 0, e


def _nccl_error():
    """Why CuPy's NCCL cannot be used, or None. ``cupy.cuda.nccl`` catches
    its own ImportError and sets ``available`` False, so importing it never
    fails; the binding it wraps says why."""
    try:
        from cupy.cuda import nccl
        if nccl.available:
            return None
        from cupy_backends.cuda.libs import nccl  # NOQA: F811  raises why
    except Exception as e:
        return e
    return ImportError('cupy.cuda.nccl is not available')


def cupy_distribution():
    """``(name, version, NumPy specifier)`` of the installed CuPy wheel
    (``('cupy-cuda13x', '14.2.0', '<2.6,>=2.0')``), or None."""
    for distribution in importlib.metadata.distributions():
        name = (distribution.metadata['Name'] or '').lower()
        if name == 'cupy' or name.startswith(('cupy-cuda', 'cupy-rocm')):
            numpy = ''
            for requirement in distribution.requires or ():
                match = re.match(r'numpy\s*\(?([^;()]*)\)?\s*$', requirement)
                if match:
                    numpy = match.group(1).strip()
            return name, distribution.version, numpy
    return None


def _major(version):
    return int(re.match(r'\d+', version).group(0))


def _numpy_mismatch(distribution):
    """The line for a CuPy that does not take the installed NumPy, or None."""
    import numpy
    name, version, specifier = distribution
    if not specifier or chainer_compat.satisfies(numpy.__version__,
                                                 specifier):
        return None
    fix = "pip install 'numpy{}'".format(specifier)
    if _major(version) >= 14 and _major(numpy.__version__) < 2:
        fix += ', or {} for CuPy 13, which runs on both NumPy lines'.format(
            INSTALL)
    return ('CuPy {} ({}) needs NumPy {}, but NumPy {} is installed; '
            '{}'.format(version, name, specifier, numpy.__version__, fix))


def _one_line(error):
    """``Type: text`` of ``error`` on one line."""
    text = ' '.join(str(error).split())
    return '{}: {}'.format(type(error).__name__, text) if text else \
        type(error).__name__


def _pip(wheels, distribution, hint):
    """``pip install 'WHEEL'`` for CuPy's CUDA, else ``hint``."""
    wheel = wheels.get(distribution and distribution[0])
    return "pip install '{}'".format(wheel) if wheel else hint


def kernel_failure(error, device_id, distribution, hint):
    """The line for ``error``, raised while a trivial kernel was compiled
    and launched on GPU ``device_id``: what is missing and its fix."""
    text = _one_line(error)
    compiling = type(error).__name__ == 'CompileException'
    if 'nvrtc' in text.lower() and not compiling:
        return ('NVRTC, the CUDA compiler of every CuPy kernel, cannot be '
                'loaded ({}); {}'.format(text, _pip(NVRTC_WHEELS,
                                                    distribution, hint)))
    header = re.search(r'cannot open source file "([^"]+)"', text)
    if header:
        return ("CUDA's headers are missing: NVRTC cannot open {} to compile "
                "CuPy's kernels ({}); {}".format(
                    header.group(1), text, _pip(HEADER_WHEELS, distribution,
                                                hint)))
    if compiling:
        return 'NVRTC cannot compile a trivial kernel ({})'.format(text)
    if 'UNSUPPORTED_PTX_VERSION' in text.upper():
        return ('the driver is older than NVRTC, so GPU {} cannot load the '
                'kernels NVRTC compiles ({}); update the driver, or install '
                "the NVRTC of the driver's CUDA".format(device_id, text))
    return 'a trivial kernel does not run on GPU {} ({})'.format(device_id,
                                                                 text)


#: NVRTC's options of the project's ElementwiseKernels: no FMA contraction,
#: so that ``a * b + c`` rounds twice, as NumPy's float operations and the
#: CPU engine's do (docs/gpu.md, "Rounding"). CuPy adds ``-ftz=true`` to
#: every kernel (subnormal floats flush to zero) and refuses a second
#: ``--ftz``.
KERNEL_OPTIONS = ('--fmad=false',)


def elementwise(spec):
    """Chainer's cached ElementwiseKernel of ``spec`` (the arguments of
    ``cuda.elementwise``), compiled with :data:`KERNEL_OPTIONS`."""
    from chainer.backends import cuda
    return cuda.elementwise(*spec, options=KERNEL_OPTIONS)


#: The kernel that :func:`check` compiles and launches: CuPy builds it as
#: it builds the project's (its headers, NVRTC), on a copied array.
CHECK_KERNEL = ('float32 x', 'float32 y', 'y = x * 2.0f + 0.5f',
                'cuda_stack_check')


def _kernel_error(device_id, distribution, hint):
    """Why CuPy cannot compile and launch a kernel on GPU ``device_id``, or
    None. NVRTC is loaded first, as CuPy loads it at its first kernel."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc
    import numpy
    try:
        nvrtc.getVersion()
        with cupy.cuda.Device(device_id):
            y = elementwise(CHECK_KERNEL)(
                cupy.asarray(numpy.ones(1, numpy.float32)))
            value = float(y[0])
    except Exception as e:
        return kernel_failure(e, device_id, distribution, hint)
    if value != 2.5:
        return ('a trivial kernel on GPU {} gave {} instead of 2.5'.format(
            device_id, value))
    return None


class CudnnOffError(InputError):
    """cuDNN cannot run, and training without it was not allowed."""


def check(allow_no_cudnn=False, need_nccl=True, intra_rank=0,
          requested=None):
    """Raise :class:`~errors.InputError` unless Chainer can train on a GPU.

    The message is one line that reads after a flag (``--gpu: ...``). It
    names what is missing or does not fit, with the install command that
    fixes it: CuPy, a CuPy built for another NumPy line, a CUDA library, a
    visible GPU, the GPU of this process (:func:`device_for` of
    ``intra_rank`` and ``requested``), a trivial kernel compiled by NVRTC
    and launched there (NVRTC, CUDA's headers, the driver), cuDNN (unless
    ``allow_no_cudnn``; CuPy 14 has none:
    :class:`CudnnOffError`, which the caller completes with its own switch)
    or NCCL (when ``need_nccl``, as every GPU communicator but ``naive`` and
    ``flat`` needs it).
    """
    hint = 'install the GPU stack with {} (docs/gpu.md)'.format(INSTALL)
    if importlib.util.find_spec('cupy') is None:
        raise InputError('CuPy is not installed; {}'.format(hint))
    distribution = cupy_distribution()
    mismatch = distribution and _numpy_mismatch(distribution)
    if mismatch:
        raise InputError(mismatch)
    from chainer.backends import cuda
    if not cuda.available:
        raise InputError('CUDA is not available: {}; {}, or put CUDA 12 on '
                         'LD_LIBRARY_PATH'.format(
                             _library_error(cuda._resolution_error), hint))
    count, error = _device_count()
    if count == 0:
        raise InputError('no GPU is visible ({}); check the driver and '
                         'CUDA_VISIBLE_DEVICES'.format(
                             str(error or 'the device count is 0').strip()))
    device_id = device_for(intra_rank, count, requested)
    failure = _kernel_error(device_id, distribution, hint)
    if failure:
        raise InputError(failure)
    if not cuda.cudnn_enabled and not allow_no_cudnn:
        if cuda._cudnn_disabled_by_user:
            reason = 'CHAINER_CUDNN=0'
        elif distribution and _major(distribution[1]) >= 14:
            reason = ('CuPy {} has no cuDNN: CuPy 13 is the last line with it'
                      .format(distribution[1]))
        else:
            reason = _library_error(cuda._resolution_error)
        raise CudnnOffError('cuDNN is off ({}), so Chainer would run '
                            'convolutions through cuBLAS, several times '
                            'slower; {} brings CuPy 13 with cuDNN 8.9'.format(
                                reason, INSTALL))
    if need_nccl:
        error = _nccl_error()
        if error is not None:
            raise InputError(
                'NCCL is not available, and the pure_nccl communicators need '
                'it: {}; {}'.format(_library_error(error), _pip(
                    NCCL_WHEELS, distribution, hint)))


def visible_gpus():
    """How many GPUs this process sees."""
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def device_for(intra_rank, visible, requested=None):
    """The GPU a process trains on: ``requested`` (``--device @cupy:N``),
    or with None its intra-node rank's (``--gpu``), and GPU 0 where the
    launcher left the process one GPU (Slurm's ``--gpus-per-task=1``).
    :class:`~errors.InputError` when that GPU is not visible."""
    device = requested
    if device is None:
        device = 0 if visible == 1 else intra_rank
    if device >= visible:
        raise InputError(
            'GPU {} is not visible to this process ({} visible, '
            'CUDA_VISIBLE_DEVICES={}); start one process per GPU, or one '
            'per visible GPU'.format(
                device, visible,
                os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')))
    return device


def uuid_of(properties):
    """``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` from the ``uuid`` bytes
    of a ``getDeviceProperties`` record: CUDA's identity of the device, a
    MIG slice's own under MIG, where the slices of one GPU share its PCI
    bus id."""
    digits = bytes(properties['uuid'])[:16].hex()
    return 'GPU-{}-{}-{}-{}-{}'.format(digits[:8], digits[8:12],
                                       digits[12:16], digits[16:20],
                                       digits[20:])


def placement(device_id):
    """``(host, UUID)`` of GPU ``device_id``: the same GPU (or MIG slice),
    whatever ``CUDA_VISIBLE_DEVICES`` numbers it."""
    import cupy
    return socket.gethostname(), uuid_of(
        cupy.cuda.runtime.getDeviceProperties(device_id))


def check_not_shared(placements):
    """:class:`~errors.InputError` when two ranks (``placements[rank]`` of
    :func:`placement`) would train on one GPU: one UUID."""
    ranks = collections.defaultdict(list)
    for rank, (host, uuid) in enumerate(placements):
        ranks[uuid].append((rank, host))
    for uuid, sharing in sorted(ranks.items()):
        if len(sharing) > 1:
            raise InputError(
                'ranks {} on {} would share one GPU ({}); use --gpu (a GPU '
                'per intra-node rank) or start the ranks through '
                'jobs/per_rank.sh'.format(
                    ','.join(str(rank) for rank, _ in sharing),
                    ','.join(sorted({host for _, host in sharing})), uuid))


def _versions():
    """CUDA runtime, driver, cuDNN and NCCL versions as strings."""
    import cupy
    from chainer.backends import cuda

    def cuda_version(v):  # 12010 -> '12.1'
        return '{}.{}'.format(v // 1000, v % 1000 // 10)
    cudnn = 'off'
    if cuda.cudnn_enabled:  # 8902 -> '8.9.2'
        v = cuda.cuda.cudnn.getVersion()
        cudnn = '{}.{}.{}'.format(v // 1000, v % 1000 // 100, v % 100)
    elif _major(cupy.__version__) >= 14:
        cudnn = 'none (CuPy 14 has no cuDNN: convolutions run on cuBLAS)'
    elif cuda._cudnn_disabled_by_user:
        cudnn = 'off (CHAINER_CUDNN=0)'
    nccl = 'unavailable'
    if _nccl_error() is None:  # 22005 -> '2.20.5'
        v = cupy.cuda.nccl.get_version()
        nccl = '{}.{}.{}'.format(v // 10000, v % 10000 // 100, v % 100)
    return (cuda_version(cupy.cuda.get_local_runtime_version()),
            cuda_version(cupy.cuda.runtime.driverGetVersion()), cudnn, nccl)


def stack_line(device_id=0):
    """``GPU <name> (sm_XX), CuPy x, CUDA runtime x (driver x), cuDNN x,
    NCCL x``: what a run on GPU ``device_id`` uses."""
    import cupy
    name = cupy.cuda.runtime.getDeviceProperties(device_id)['name']
    name = name.decode() if isinstance(name, bytes) else name
    capability = cupy.cuda.Device(device_id).compute_capability
    return ('GPU {} (sm_{}), CuPy {}, CUDA runtime {} (driver {}), cuDNN {}, '
            'NCCL {}'.format(name, capability, cupy.__version__,
                             *_versions()))


# cuDNN as the trainer sets it (docs/gpu.md): Chainer's own defaults are no
# autotuning and an 8 MiB workspace, which rules out cuDNN's faster
# convolution algorithms for most of ResNet-50's layers.
CUDNN_WORKSPACE_MIB = 512
CUDNN_AUTOTUNE = True


def configure_cudnn(autotune=CUDNN_AUTOTUNE,
                    workspace_mib=CUDNN_WORKSPACE_MIB):
    """Set Chainer's cuDNN autotuning and workspace limit; return both.

    ``autotune``: cuDNN times the convolution algorithms at each new shape
    (in the first iterations) and keeps the fastest that fits the workspace.
    ``workspace_mib``: the scratch memory one convolution may use.
    """
    import chainer
    from chainer.backends import cuda
    chainer.global_config.autotune = autotune
    cuda.set_max_workspace_size(workspace_mib * 2 ** 20)
    return chainer.global_config.autotune, cuda.get_max_workspace_size()


def main():
    preload()
    try:
        check(allow_no_cudnn='--allow-no-cudnn' in sys.argv[1:])
    except InputError as e:
        print('cuda_stack: {}'.format(e), file=sys.stderr)
        sys.exit(2)
    print(stack_line(0))


if __name__ == '__main__':
    main()
