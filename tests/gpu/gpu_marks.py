"""The mark of the GPU tests: ``gpu``, skipped with the reason where no GPU.

A test module sets ``pytestmark = gpu_marks.GPU``. Without CuPy, CUDA or a
visible GPU the reason is :func:`cuda_stack.check`'s line; a missing cuDNN
or NCCL fails the tests instead (test_gpu_stack.py names it).
"""
import os

import pytest

from largebatch import cuda_stack
from largebatch.errors import InputError


def _missing():
    try:
        cuda_stack.check(allow_no_cudnn=True, need_nccl=False)
    except InputError as e:
        return str(e)
    return None


MISSING = _missing()
GPU = [pytest.mark.gpu,
       pytest.mark.skipif(MISSING is not None,
                          reason='no GPU: {}'.format(MISSING))]


def gpu_count():
    """GPUs visible to this process (0 without CuPy or CUDA)."""
    if MISSING is not None:
        return 0
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def child_env():
    """Environment of a child process: the wheels' CUDA libraries on
    ``LD_LIBRARY_PATH``, for scripts that import chainer without preloading.
    """
    paths = cuda_stack.library_dirs() + [
        p for p in os.environ.get('LD_LIBRARY_PATH', '').split(':') if p]
    return {'LD_LIBRARY_PATH': ':'.join(paths)}
