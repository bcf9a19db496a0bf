"""cuda_stack on CPU: preloading pip's CUDA libraries, one-line checks."""
import ctypes
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import types

from chainer.backends import cuda
import numpy
import pytest

from conftest import REPO
from largebatch import cuda_stack
from largebatch.errors import InputError

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
                  cudnn_disabled_by_user=False, nccl_error=None,
                  cupy=('cupy-cuda12x', '13.6.0', '<2.6,>=1.22'),
                  kernel_error=None):
        cupy_installed(True)
        monkeypatch.setattr(cuda_stack, 'cupy_distribution', lambda: cupy)
        monkeypatch.setattr(numpy, '__version__', '2.4.6')
        monkeypatch.setattr(cuda, 'available', available)
        monkeypatch.setattr(cuda, 'cudnn_enabled', cudnn)
        monkeypatch.setattr(cuda, '_cudnn_disabled_by_user',
                            cudnn_disabled_by_user, raising=False)
        monkeypatch.setattr(cuda, '_resolution_error', error, raising=False)
        monkeypatch.setattr(cuda_stack, '_device_count', lambda: (
            gpus, None if gpus else RuntimeError(
                'cudaErrorNoDevice: no CUDA-capable device is detected')))
        monkeypatch.setattr(cuda_stack, '_nccl_error', lambda: nccl_error)
        launched = []
        monkeypatch.setattr(cuda_stack, '_kernel_error', lambda *args: (
            launched.append(args[0]) or kernel_error))
        return launched
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
    assert INSTALL in message
    with pytest.raises(cuda_stack.CudnnOffError):
        cuda_stack.check()
    assert cuda_stack.check(allow_no_cudnn=True) is None


def test_check_says_when_the_user_turned_cudnn_off(cuda_state):
    cuda_state(cudnn=False, cudnn_disabled_by_user=True)
    assert message_of().startswith('cuDNN is off (CHAINER_CUDNN=0)')


def test_check_names_a_missing_nccl_when_needed(cuda_state):
    cuda_state(nccl_error=ImportError(
        'libnccl.so.2: cannot open shared object file'))
    assert message_of() == (
        'NCCL is not available, and the pure_nccl communicators need it: '
        'libnccl.so.2 cannot be loaded (libnccl.so.2: cannot open shared '
        "object file); pip install 'nvidia-nccl-cu12==2.20.5'")
    assert cuda_stack.check(need_nccl=False) is None


def test_check_names_the_nccl_wheel_of_cupys_cuda(cuda_state):
    cuda_state(cudnn=False, nccl_error=ImportError('libnccl.so.2: nope'),
               cupy=('cupy-cuda13x', '14.2.0', '<2.6,>=2.0'))
    assert message_of(allow_no_cudnn=True).endswith(
        "; pip install 'nvidia-nccl-cu13'")


def test_check_says_cupy_14_has_no_cudnn_and_names_the_extra(cuda_state):
    cuda_state(cudnn=False, error=ModuleNotFoundError(
        "No module named 'cupy.cuda.cudnn'"),
        cupy=('cupy-cuda13x', '14.2.0', '<2.6,>=2.0'))
    assert message_of() == (
        'cuDNN is off (CuPy 14.2.0 has no cuDNN: CuPy 13 is the last line '
        'with it), so Chainer would run convolutions through cuBLAS, '
        "several times slower; pip install -e '.[gpu]' brings CuPy 13 with "
        'cuDNN 8.9')
    assert cuda_stack.check(allow_no_cudnn=True) is None


@pytest.mark.parametrize('numpy_version, cupy, fix', [
    ('1.26.4', ('cupy-cuda13x', '14.2.0', '<2.6,>=2.0'),
     "pip install 'numpy<2.6,>=2.0', or pip install -e '.[gpu]' for CuPy "
     '13, which runs on both NumPy lines'),
    ('2.6.0', ('cupy-cuda12x', '13.6.0', '<2.6,>=1.22'),
     "pip install 'numpy<2.6,>=1.22'")])
def test_check_names_a_cupy_built_for_another_numpy(
        cuda_state, monkeypatch, numpy_version, cupy, fix):
    cuda_state(cupy=cupy)
    monkeypatch.setattr(numpy, '__version__', numpy_version)
    assert message_of() == (
        'CuPy {} ({}) needs NumPy {}, but NumPy {} is installed; {}'.format(
            cupy[1], cupy[0], cupy[2], numpy_version, fix))


def test_the_cupy_distribution_is_read_from_its_metadata(monkeypatch):
    class Distribution(object):
        def __init__(self, name, version, requires):
            self.metadata = {'Name': name}
            self.version, self.requires = version, requires
    monkeypatch.setattr(importlib.metadata, 'distributions', lambda: [
        Distribution('numpy', '2.4.6', None),
        Distribution('cupy-cuda13x', '14.2.0', [
            'numpy<2.6,>=2.0', 'cuda-pathfinder==1.*,>=1.3.4',
            'scipy<1.18,>=1.14; extra == "all"'])])
    assert cuda_stack.cupy_distribution() == (
        'cupy-cuda13x', '14.2.0', '<2.6,>=2.0')
    monkeypatch.setattr(importlib.metadata, 'distributions', lambda: [])
    assert cuda_stack.cupy_distribution() is None


def test_the_stack_line_says_cupy_14_has_no_cudnn(monkeypatch):
    fake = types.SimpleNamespace(__version__='14.2.0')
    fake.cuda = types.SimpleNamespace(
        get_local_runtime_version=lambda: 13000,
        runtime=types.SimpleNamespace(driverGetVersion=lambda: 13010),
        nccl=types.SimpleNamespace(get_version=lambda: 23206))
    monkeypatch.setitem(sys.modules, 'cupy', fake)
    monkeypatch.setattr(cuda, 'cudnn_enabled', False)
    monkeypatch.setattr(cuda_stack, '_nccl_error', lambda: None)
    assert cuda_stack._versions() == (
        '13.0', '13.1',
        'none (CuPy 14 has no cuDNN: convolutions run on cuBLAS)', '2.32.6')


def test_preload_sets_lazy_module_loading_unless_set(tmp_path, monkeypatch):
    monkeypatch.delenv('CUDA_MODULE_LOADING', raising=False)
    cuda_stack.preload([str(tmp_path)])
    assert os.environ['CUDA_MODULE_LOADING'] == 'LAZY'
    monkeypatch.setenv('CUDA_MODULE_LOADING', 'EAGER')
    cuda_stack.preload([str(tmp_path)])
    assert os.environ['CUDA_MODULE_LOADING'] == 'EAGER'


def test_check_passes_a_complete_stack(cuda_state):
    cuda_state()
    assert cuda_stack.check() is None


def test_an_error_without_a_library_keeps_its_type():
    assert cuda_stack._library_error(ImportError(
        "No module named 'cupy'")) == "ImportError: No module named 'cupy'"


def test_module_run_prints_one_line_and_exits_2_without_cupy():
    if importlib.util.find_spec('cupy') is not None:
        pytest.skip('CuPy is installed here')
    proc = subprocess.run([sys.executable, '-m', 'largebatch.cuda_stack'],
                          cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr.startswith('cuda_stack: CuPy is not installed')
    assert proc.stderr.count('\n') == 1


def test_configure_cudnn_sets_autotune_and_the_workspace(monkeypatch):
    # Chainer keeps the workspace size in cuDNN (a no-op without it).
    import chainer
    workspace = []
    monkeypatch.setattr(cuda, 'set_max_workspace_size', workspace.append)
    monkeypatch.setattr(cuda, 'get_max_workspace_size',
                        lambda: workspace[-1])
    monkeypatch.setattr(chainer.global_config, 'autotune', False)
    assert cuda_stack.configure_cudnn() == (True, 512 * 2 ** 20)
    assert chainer.config.autotune is True
    assert cuda_stack.configure_cudnn(False, 0) == (False, 0)
    assert chainer.config.autotune is False


@pytest.mark.parametrize('intra_rank, visible, requested, expected', [
    (3, 8, None, 3),   # --gpu, every GPU of the node visible
    (3, 1, None, 0),   # --gpu, the launcher bound one GPU per task
    (0, 1, 0, 0),      # --device @cupy:0 through per_rank.sh
    (1, 4, 2, 2),
])
def test_device_for_a_process(intra_rank, visible, requested, expected):
    assert cuda_stack.device_for(intra_rank, visible, requested) == expected


@pytest.mark.parametrize('intra_rank, visible, requested', [
    (2, 2, None), (0, 2, 5)])
def test_a_gpu_the_process_cannot_see_is_one_line(intra_rank, visible,
                                                  requested, monkeypatch):
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '0,1')
    with pytest.raises(InputError) as e:
        cuda_stack.device_for(intra_rank, visible, requested)
    assert str(e.value).startswith('GPU {} is not visible'.format(
        requested if requested is not None else intra_rank))
    assert '2 visible, CUDA_VISIBLE_DEVICES=0,1' in str(e.value)
    assert '\n' not in str(e.value)


def device_record(uuid_hex, bus='0000:1b:00.0'):
    """A stand-in of ``getDeviceProperties``' record: 16 UUID bytes."""
    return {'uuid': bytes.fromhex(uuid_hex), 'pciBusID': int(bus[5:7], 16),
            'name': b'NVIDIA H100 80GB HBM3'}


SLICE_1 = 'b7e8a1c2d3f4051627384950aabbccdd'
SLICE_2 = '0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a'


def test_a_gpu_is_named_by_its_uuid():
    assert cuda_stack.uuid_of(device_record(SLICE_1)) == (
        'GPU-b7e8a1c2-d3f4-0516-2738-4950aabbccdd')


def test_mig_slices_of_one_gpu_are_not_shared():
    # two MIG slices of one H100: one PCI bus id, two UUIDs
    slices = [('a', cuda_stack.uuid_of(device_record(uuid)))
              for uuid in (SLICE_1, SLICE_2)]
    cuda_stack.check_not_shared(slices)


def test_ranks_on_one_gpu_are_refused_with_their_node():
    one, other = (cuda_stack.uuid_of(device_record(uuid))
                  for uuid in (SLICE_1, SLICE_2))
    cuda_stack.check_not_shared([('a', one), ('a', other)])
    with pytest.raises(InputError, match=r'^ranks 0,2 on a would share one '
                       r'GPU \(GPU-b7e8a1c2-d3f4-0516-2738-4950aabbccdd\); '
                       r'use --gpu'):
        cuda_stack.check_not_shared([('a', one), ('b', other), ('a', one)])


def test_check_launches_a_kernel_on_the_gpu_of_the_process(cuda_state):
    launched = cuda_state(gpus=4)
    cuda_stack.check(intra_rank=2)
    cuda_stack.check(intra_rank=2, requested=3)
    assert launched == [2, 3]
    launched = cuda_state(gpus=1)  # the launcher left the process one GPU
    cuda_stack.check(intra_rank=2)
    assert launched == [0]


def test_check_fails_with_the_kernels_line(cuda_state):
    cuda_state(kernel_error='NVRTC, the CUDA compiler ... cannot be loaded')
    assert message_of(allow_no_cudnn=True).startswith('NVRTC, the CUDA')


class CompileException(Exception):
    """As CuPy's: NVRTC's log, several lines."""


CUPY_13 = ('cupy-cuda12x', '13.6.0', '<2.6,>=1.22')
CUPY_14_CUDA_12 = ('cupy-cuda12x', '14.2.0', '<2.6,>=2.0')
CUPY_14_CUDA_13 = ('cupy-cuda13x', '14.2.0', '<2.6,>=2.0')


@pytest.mark.parametrize('error, cupy, said', [
    # what CuPy 13 and CuPy 14 (cuda-pathfinder) raise at the first kernel
    (RuntimeError('CuPy failed to load libnvrtc.so.12: OSError: '
                  'libnvrtc.so.12: cannot open shared object file: No such '
                  'file or directory'), CUPY_13,
     "NVRTC, the CUDA compiler of every CuPy kernel, cannot be loaded "
     "(RuntimeError: CuPy failed to load libnvrtc.so.12: OSError: "
     "libnvrtc.so.12: cannot open shared object file: No such file or "
     "directory); pip install 'nvidia-cuda-nvrtc-cu12==12.1.105'"),
    (RuntimeError('Failure finding "libnvrtc.so*": no match'),
     CUPY_14_CUDA_13,
     "NVRTC, the CUDA compiler of every CuPy kernel, cannot be loaded "
     "(RuntimeError: Failure finding \"libnvrtc.so*\": no match); pip "
     "install 'cuda-toolkit[nvrtc]==13.*'"),
    (CompileException('/tmp/tmpab/cuda_stack_check.cu(1): catastrophic '
                      'error: cannot open source file "cuda_fp16.h"\n  '
                      '#include <cuda_fp16.h>\n\n1 catastrophic error'),
     CUPY_14_CUDA_12,
     "CUDA's headers are missing: NVRTC cannot open cuda_fp16.h to compile "
     "CuPy's kernels (CompileException: /tmp/tmpab/cuda_stack_check.cu(1): "
     "catastrophic error: cannot open source file \"cuda_fp16.h\" #include "
     "<cuda_fp16.h> 1 catastrophic error); pip install "
     "'nvidia-cuda-runtime-cu12==12.1.105'"),
    (RuntimeError('CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was '
                  'compiled with an unsupported toolchain.'), CUPY_13,
     'the driver is older than NVRTC, so GPU 1 cannot load the kernels '
     'NVRTC compiles (RuntimeError: CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the '
     'provided PTX was compiled with an unsupported toolchain.); update the '
     "driver, or install the NVRTC of the driver's CUDA"),
    (RuntimeError('cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are '
                  'busy or unavailable'), CUPY_13,
     'a trivial kernel does not run on GPU 1 (RuntimeError: '
     'cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or '
     'unavailable)'),
])
def test_a_kernel_that_fails_names_what_is_missing(error, cupy, said):
    assert cuda_stack.kernel_failure(error, 1, cupy, 'HINT') == said
