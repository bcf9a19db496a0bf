"""cuda_stack on CPU: preloading pip's CUDA libraries, one-line checks."""
import ctypes
import importlib.util
import os
import subprocess
import sys

from chainer.backends import cuda
import pytest

from conftest import REPO
import cuda_stack
from errors import InputError

INSTALL = "pip install -e '.[gpu]'"


@pytest.fixture
def cupy_installed(monkeypatch):
    """Make ``find_spec('cupy')`` say CuPy is (or is not) installed."""
    real = importlib.util.find_spec

    def set_installed(installed):
        def find_spec(name, *args):
            if name == 'cupy':
                return object() if installed else None
            return real(name, *args)
        monkeypatch.setattr(importlib.util, 'find_spec', find_spec)
    return set_installed


@pytest.fixture
def cuda_state(monkeypatch, cupy_installed):
    """Set what Chainer found at import: CUDA, GPUs, cuDNN and NCCL."""
    def set_state(available=True, error=None, gpus=1, cudnn=True,
                  cudnn_disabled_by_user=False, nccl_error=None):
        cupy_installed(True)
        monkeypatch.setattr(cuda, 'available', available)
        monkeypatch.setattr(cuda, 'cudnn_enabled', cudnn)
        monkeypatch.setattr(cuda, '_cudnn_disabled_by_user',
                            cudnn_disabled_by_user, raising=False)
        monkeypatch.setattr(cuda, '_resolution_error', error, raising=False)
        monkeypatch.setattr(cuda_stack, '_device_count', lambda: (
            gpus, None if gpus else RuntimeError(
                'cudaErrorNoDevice: no CUDA-capable device is detected')))
        monkeypatch.setattr(cuda_stack, '_nccl_error', lambda: nccl_error)
    return set_state


def message_of(**kwargs):
    with pytest.raises(InputError) as info:
        cuda_stack.check(**kwargs)
    message = str(info.value)
    assert '\n' not in message
    return message


def fake_wheels(root, names):
    for name in names:
        path = os.path.join(str(root), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, 'w').close()


def test_preload_does_nothing_without_cupy(cupy_installed):
    cupy_installed(False)
    assert cuda_stack.wheel_roots() == []
    assert cuda_stack.preload() == []


def test_preload_does_nothing_without_the_wheels(tmp_path):
    assert cuda_stack.preload([str(tmp_path)]) == []


def test_preload_loads_in_dependency_order_with_rtld_global(
        tmp_path, monkeypatch):
    fake_wheels(tmp_path, [
        'nccl/lib/libnccl.so.2', 'cudnn/lib/libcudnn.so.8',
        'cudnn/lib/libcudnn_cnn_infer.so.8',
        'cudnn/lib/libcudnn_ops_infer.so.8', 'cublas/lib/libcublas.so.12',
        'cublas/lib/libcublasLt.so.12', 'cublas/lib/libnvblas.so.12',
        'cuda_nvrtc/lib/libnvrtc-builtins.so.12.1',
        'cuda_nvrtc/lib/libnvrtc.so.12'])
    calls = []
    monkeypatch.setattr(cuda_stack.ctypes, 'CDLL',
                        lambda path, mode: calls.append((path, mode)))
    loaded = cuda_stack.preload([str(tmp_path)])
    assert [os.path.relpath(path, str(tmp_path)) for path in loaded] == [
        'cuda_nvrtc/lib/libnvrtc.so.12',
        'cuda_nvrtc/lib/libnvrtc-builtins.so.12.1',
        'cublas/lib/libcublasLt.so.12', 'cublas/lib/libcublas.so.12',
        'cudnn/lib/libcudnn_ops_infer.so.8',
        'cudnn/lib/libcudnn_cnn_infer.so.8', 'cudnn/lib/libcudnn.so.8',
        'nccl/lib/libnccl.so.2']
    assert calls == [(path, ctypes.RTLD_GLOBAL) for path in loaded]


def test_preload_skips_a_library_that_does_not_load(tmp_path):
    fake_wheels(tmp_path, ['cublas/lib/libcublas.so.12'])  # an empty file
    assert cuda_stack.preload([str(tmp_path)]) == []


def test_check_names_cupy_and_the_install_command(cupy_installed):
    cupy_installed(False)
    message = message_of()
    assert 'CuPy is not installed' in message and INSTALL in message


def test_check_names_the_library_cuda_misses(cuda_state):
    cuda_state(available=False, error=ImportError(
        'libcublas.so.12: cannot open shared object file: No such file or '
        'directory'))
    message = message_of()
    assert message.startswith('CUDA is not available: libcublas.so.12 cannot '
                              'be loaded')
    assert INSTALL in message and 'LD_LIBRARY_PATH' in message


def test_check_needs_a_visible_gpu(cuda_state):
    cuda_state(gpus=0)
    assert 'no GPU is visible (cudaErrorNoDevice' in message_of()


def test_check_refuses_a_missing_cudnn_unless_allowed(cuda_state):
    cuda_state(cudnn=False, error=ImportError(
        'libcudnn.so.8: cannot open shared object file: No such file or '
        'directory'))
    message = message_of()
    assert message.startswith('cuDNN is off (libcudnn.so.8 cannot be loaded')
    assert '--allow-no-cudnn' in message and INSTALL in message
    assert cuda_stack.check(allow_no_cudnn=True) is None


def test_check_says_when_the_user_turned_cudnn_off(cuda_state):
    cuda_state(cudnn=False, cudnn_disabled_by_user=True)
    assert message_of().startswith('cuDNN is off (CHAINER_CUDNN=0)')


def test_check_names_a_missing_nccl_when_needed(cuda_state):
    cuda_state(nccl_error=ImportError(
        'libnccl.so.2: cannot open shared object file'))
    assert message_of().startswith(
        'NCCL is not available: libnccl.so.2 cannot be loaded')
    assert cuda_stack.check(need_nccl=False) is None


def test_check_passes_a_complete_stack(cuda_state):
    cuda_state()
    assert cuda_stack.check() is None


def test_an_error_without_a_library_keeps_its_type():
    assert cuda_stack._library_error(ImportError(
        "No module named 'cupy'")) == "ImportError: No module named 'cupy'"


def test_module_run_prints_one_line_and_exits_2_without_cupy():
    if importlib.util.find_spec('cupy') is not None:
        pytest.skip('CuPy is installed here')
    proc = subprocess.run([sys.executable, '-m', 'cuda_stack'], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr.startswith('cuda_stack: CuPy is not installed')
    assert proc.stderr.count('\n') == 1
