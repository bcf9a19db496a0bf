"""Float16 gradient all-reduce: `mpiexec` jobs on 2, 3 and 4 CPU workers."""
import pytest

# fp16_contract.CHECKS, then comm_fp16_mean.py's own
CHECKS = ['ok mean float32', 'ok mean float16', 'ok magnitudes',
          'ok large float32', 'ok large float16', 'ok non-finite nan',
          'ok non-finite inf', 'ok optimizer', 'ok missing float32',
          'ok missing float16', 'ok broadcast float32',
          'ok broadcast float16', 'ok api', 'ok factory']


@pytest.mark.parametrize('n_workers', [2, 3, 4])
def test_mpi_fp16_contract_range_and_non_finite_check(mpirun, n_workers):
    proc = mpirun(n_workers, ['tests/mpi_scripts/comm_fp16_mean.py'])
    lines = proc.stdout.splitlines()
    for check in CHECKS:
        assert lines.count(check) == n_workers, (check, proc.stdout)
