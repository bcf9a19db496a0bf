"""communicators.create_communicator refuses bad names in one line;
tests/integration/test_communicators.py builds the good ones on MPI."""
import pytest

import communicators


@pytest.mark.parametrize('name,dtype,listed', [
    ('nccl', 'float32', 'pure_nccl_fp16'),
    ('flat', 'float16', 'mpi_fp16'),
    ('naive', 'bfloat16', 'float16'),
    ('mpi_fp16', 'float32', 'naive'),
    ('pure_nccl_fp16', 'float32', 'pure_nccl')])
def test_bad_names_raise_one_line_value_error(name, dtype, listed):
    with pytest.raises(ValueError) as info:
        communicators.create_communicator(name, dtype)
    message = str(info.value)
    assert '\n' not in message and listed in message


@pytest.mark.parametrize('name', ['pure_nccl', 'pure_nccl_fp16',
                                  'non_cuda_aware'])
def test_nccl_needs_gpus(name):
    with pytest.raises(ValueError) as info:
        communicators.create_communicator(name, gpu=False)
    assert str(info.value) == 'communicator {!r} needs GPUs (NCCL)'.format(
        name)


@pytest.mark.parametrize('name,dtype', [('naive', 'float16'),
                                        ('mpi_fp16', None)])
def test_the_cpu_float16_communicator_is_refused_on_gpus(name, dtype):
    """mpi_fp16 converts and sums NumPy arrays; ChainerMN's broadcast
    would hand MPI device pointers before the first update failed."""
    with pytest.raises(ValueError) as info:
        communicators.create_communicator(name, dtype, gpu=True)
    assert str(info.value) == (
        "communicator 'mpi_fp16' all-reduces CPU (NumPy) gradients; on GPUs: "
        'pure_nccl_fp16, or naive or flat in float32 with a CUDA-aware MPI')
