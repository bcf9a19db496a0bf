"""Whether the MPI takes GPU buffers (communicators/cuda_aware.py), and the
factory's refusal of naive and flat on GPUs where it does not."""
import os
import subprocess
import sys

import pytest

import communicators
from communicators import cuda_aware
from communicators import factory
from communicators import mpi_start


def built_with_cuda():
    """What Open MPI's ompi_info says of this library, or None."""
    ompi_info = os.path.join(os.path.dirname(sys.executable), 'ompi_info')
    if not os.path.exists(ompi_info):
        return None
    found = subprocess.run([ompi_info, '--parsable', '--all'],
                           capture_output=True, text=True).stdout
    for value in ('true', 'false'):
        if ('opal_built_with_cuda_support:value:' + value) in found:
            return value == 'true'
    return None


def test_open_mpi_says_what_ompi_info_says():
    MPI = communicators.start_mpi()
    if 'Open MPI' not in MPI.Get_library_version():
        pytest.skip('not Open MPI')
    expected = built_with_cuda()
    if expected is None:
        pytest.skip('no ompi_info beside this Python')
    assert cuda_aware.cuda_aware_mpi(MPI) is expected
    assert mpi_start.library_name(MPI).startswith('Open MPI v')


def test_an_mpi_that_cannot_say_is_not_refused():
    class Unloadable(object):
        __file__ = '/nonexistent/MPI.so'
    assert cuda_aware.cuda_aware_mpi(Unloadable) is None


@pytest.mark.parametrize('name', factory.MPI_GPU_NAMES)
def test_naive_and_flat_on_gpus_need_a_cuda_aware_mpi(monkeypatch, name):
    monkeypatch.setattr(factory, 'cuda_aware_mpi', lambda MPI: False)
    monkeypatch.setattr(factory, 'library_name', lambda MPI: 'Open MPI v5')
    with pytest.raises(ValueError) as info:
        communicators.create_communicator(name, 'float32', gpu=True)
    assert str(info.value) == (
        'communicator {!r} hands MPI GPU arrays, and this MPI is not '
        'CUDA-aware (Open MPI v5); on GPUs: pure_nccl or pure_nccl_fp16 '
        '(NCCL), or a CUDA-aware MPI'.format(name))


@pytest.mark.parametrize('answer,gpu', [(True, True), (None, True),
                                        (False, False)])
def test_naive_where_mpi_is_cuda_aware_silent_or_given_numpy(monkeypatch,
                                                             answer, gpu):
    monkeypatch.setattr(factory, 'cuda_aware_mpi', lambda MPI: answer)
    comm = communicators.create_communicator('naive', 'float32', gpu=gpu)
    assert type(comm).__name__ == 'NaiveCommunicator'
