"""The CUDA stack of the ``gpu`` extra: CuPy, cuDNN 8.9 and NCCL load.

All but the last test need CuPy only, not a GPU: ``make test-gpu-stack``
runs them in ``.venv-gpu``. Without CuPy (the CPU venv, CI) they skip; the
tests of the extra's own pins skip on another stack (CuPy 14, which has no
cuDNN, or CuPy 13 without cuDNN 8), where the last test checks the line that
stack prints. The extra is CuPy 13 with ``libcudnn.so.8`` loadable: a cuDNN 9
(PyTorch's CUDA 12 wheels bring one) is not the extra's, as CuPy 13 cannot
use it.
"""
import ctypes
import re

import pytest

from largebatch import cuda_stack
import gpu_marks

cupy = pytest.importorskip('cupy', reason='CuPy is not installed (the gpu '
                           "extra: pip install -e '.[gpu]')")


def is_gpu_extra(cupy_version, cudnn_8=cuda_stack.CUDNN_8):
    """Whether the stack is the ``gpu`` extra's: CuPy 13 with cuDNN 8."""
    if not cupy_version.startswith('13.'):
        return False
    try:
        ctypes.CDLL(cudnn_8)  # preloaded from the wheel, or the system's
    except OSError:
        return False
    return True


GPU_EXTRA = is_gpu_extra(cupy.__version__)
gpu_extra = pytest.mark.skipif(
    not GPU_EXTRA, reason='CuPy {} is not the gpu extra\'s CuPy 13 with '
    '{}'.format(cupy.__version__, cuda_stack.CUDNN_8))


def test_the_extra_is_cupy_13_with_cudnn_8(tmp_path):
    # CuPy 14 beside any cuDNN (PyTorch's cuDNN 9) is not the extra
    assert not is_gpu_extra('14.2.0')
    assert not is_gpu_extra('13.6.0', str(tmp_path / 'libcudnn.so.8'))


def test_cupy_is_13_or_14():
    assert cupy.__version__.split('.')[0] in ('13', '14')


@gpu_extra
def test_cupy_is_13_the_last_line_with_cudnn():
    assert cupy.__version__.startswith('13.')


@gpu_extra
def test_preload_loaded_every_wheel():
    packages = [package for package, _ in cuda_stack.LIBRARIES]
    dirs = cuda_stack.library_dirs()
    assert [d.split('/')[-2] for d in dirs] == packages
    loaded = cuda_stack.preload()  # again: the libraries load as before
    assert {path.split('/')[-3] for path in loaded} == set(packages)


@gpu_extra
def test_chainer_finds_cuda_and_cudnn_8_9():
    from chainer.backends import cuda
    assert cuda.available, cuda._resolution_error
    assert cuda.cudnn_enabled, cuda._resolution_error
    assert cuda.cuda.cudnn.getVersion() // 100 == 89


def test_chainermn_has_nccl_with_float16():
    from cupy.cuda import nccl
    from chainermn import nccl as chainermn_nccl
    from chainermn.communicators import _communication_utility
    import numpy
    assert chainermn_nccl._available
    assert nccl.get_version() >= 21600  # CuPy 13's wheel needs >= 2.16.5
    assert _communication_utility._get_nccl_type_id(
        numpy.dtype(numpy.float16)) == nccl.NCCL_FLOAT16


def test_the_float16_communicator_imports():
    from communicators.pure_nccl_fp16_communicator import \
        PureNcclFp16Communicator
    from chainermn.communicators.pure_nccl_communicator import \
        PureNcclCommunicator
    assert issubclass(PureNcclFp16Communicator, PureNcclCommunicator)


class FakeDevice(object):

    def __init__(self, device_id):
        self.compute_capability = '90'


@gpu_extra
def test_stack_line_reads_the_loaded_libraries(monkeypatch):
    # Without a GPU: the device's name and capability are made up, the
    # library versions are those loaded; the driver reads 0.0 without one.
    monkeypatch.setattr(cupy.cuda.runtime, 'getDeviceProperties',
                        lambda device_id: {'name': b'NVIDIA H200'})
    monkeypatch.setattr(cupy.cuda, 'Device', FakeDevice)
    line = cuda_stack.stack_line(0)
    assert re.match(r'GPU NVIDIA H200 \(sm_90\), CuPy 13\.\d+\.\d+, CUDA '
                    r'runtime 12\.\d+ \(driver \d+\.\d+\), cuDNN '
                    r'8\.9\.\d+, NCCL 2\.\d+\.\d+$', line), line


@pytest.mark.gpu
@pytest.mark.skipif(gpu_marks.MISSING is not None,
                    reason='no GPU: {}'.format(gpu_marks.MISSING))
def test_check_passes_and_the_stack_line_names_every_part():
    cuda_stack.check(allow_no_cudnn=not GPU_EXTRA)
    line = cuda_stack.stack_line(0)
    print(line)
    cudnn = r'8\.9\.\d+' if GPU_EXTRA else r'(\d+\.\d+\.\d+|none .*|off.*)'
    assert re.match(r'GPU .+ \(sm_\d+\), CuPy 1[34]\.\d+\.\d+, CUDA runtime '
                    r'1[23]\.\d+ \(driver \d+\.\d+\), cuDNN ' + cudnn +
                    r', NCCL 2\.\d+\.\d+$', line), line
