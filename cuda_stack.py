"""The CUDA 12 stack of GPU runs: pip's CUDA libraries, and a start-up check.

CuPy 13 finds pip's NCCL wheel by itself but not its cuBLAS or cuDNN, and
Chainer then starts with ``cuda.available`` or ``cudnn_enabled`` False
without a word. :func:`preload` loads the libraries of the ``nvidia-*``
wheels (the ``gpu`` extra) into the process first; :func:`check` turns a
stack that cannot train on a GPU into one line. A trainer calls them as::

    import cuda_stack
    cuda_stack.preload()            # before chainer (and cupy) is imported

    import chainer
    ...
    if on_gpu:
        try:
            cuda_stack.check(allow_no_cudnn=args.allow_no_cudnn)
        except errors.InputError as e:
            raise errors.InputError('--gpu: {}'.format(e))
        if comm.rank == 0:
            print(cuda_stack.stack_line(device.device.id))

``python -m cuda_stack`` runs the check and prints the line of GPU 0. See
docs/gpu.md for the pins and the system-CUDA alternative.
"""
import ctypes
import glob
import importlib.util
import os
import re
import sys

from errors import InputError

INSTALL = "pip install -e '.[gpu]'"

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
               'libcudnn.so.8')),
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
    without the wheels (or without CuPy) this does nothing. ``roots``: the
    ``nvidia`` folders, :func:`wheel_roots` by default.
    """
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
    try:
        from cupy.cuda import nccl  # NOQA
    except Exception as e:
        return e
    return None


def check(allow_no_cudnn=False, need_nccl=True):
    """Raise :class:`~errors.InputError` unless Chainer can train on a GPU.

    The message is one line that reads after a flag (``--gpu: ...``). It
    names what is missing: CuPy, a CUDA library, a visible GPU, cuDNN
    (unless ``allow_no_cudnn``) or NCCL (when ``need_nccl``, as every GPU
    communicator but ``naive`` and ``flat`` needs it).
    """
    hint = 'install the GPU stack with {} (docs/gpu.md)'.format(INSTALL)
    if importlib.util.find_spec('cupy') is None:
        raise InputError('CuPy is not installed; {}'.format(hint))
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
    if not cuda.cudnn_enabled and not allow_no_cudnn:
        reason = ('CHAINER_CUDNN=0' if cuda._cudnn_disabled_by_user
                  else _library_error(cuda._resolution_error))
        raise InputError('cuDNN is off ({}); {}, or pass --allow-no-cudnn to '
                         'train without it (slower)'.format(reason, hint))
    if need_nccl:
        error = _nccl_error()
        if error is not None:
            raise InputError('NCCL is not available: {}; {}'.format(
                _library_error(error), hint))


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


def main():
    preload()
    try:
        check()
    except InputError as e:
        print('cuda_stack: {}'.format(e), file=sys.stderr)
        sys.exit(2)
    print(stack_line(0))


if __name__ == '__main__':
    main()
