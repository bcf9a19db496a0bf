"""Float16 gradient all-reduce: `mpiexec` jobs on 2, 3 and 4 CPU workers."""
import numpy
import pytest

import errors
import communicators

CHECKS = ['ok mean', 'ok large', 'ok non-finite nan', 'ok non-finite inf',
          'ok optimizer', 'ok zero_fill', 'ok api', 'ok factory']


@pytest.mark.parametrize('n_workers', [2, 3, 4])
def test_mpi_fp16_mean_range_and_non_finite_check(mpirun, n_workers):
    proc = mpirun(n_workers, ['tests/mpi_scripts/comm_fp16_mean.py'])
    lines = proc.stdout.splitlines()
    for check in CHECKS:
        assert lines.count(check) == n_workers, (check, proc.stdout)


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


def test_non_finite_error_names_first_parameter():
    class Param(object):
        def __init__(self, size):
            self.grad = numpy.zeros(size)

    named = [('/a', Param(3)), ('/b/W', Param(2)), ('/c', Param(4))]
    error = errors.NonFiniteGradientError.at(7, 4, named)
    assert isinstance(error, RuntimeError)
    assert (error.count, error.param_name) == (7, '/b/W')


def test_pure_nccl_fp16_on_gpu(mpirun):
    cupy = pytest.importorskip('cupy')
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.skip('no GPU')
    proc = mpirun(1, ['tests/mpi_scripts/comm_pure_nccl_fp16.py'])
    for check in ('ok mean', 'ok large', 'ok non-finite'):
        assert check in proc.stdout.splitlines()
