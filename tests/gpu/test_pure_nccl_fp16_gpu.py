"""The pure_nccl_fp16 communicator on 1 GPU, and on 2 where there are 2:
the float16 communicators' contract (tests/mpi_scripts/fp16_contract.py)."""
import pytest

import gpu_marks

pytestmark = gpu_marks.GPU

# fp16_contract.CHECKS
CHECKS = ['ok mean float32', 'ok mean float16', 'ok magnitudes',
          'ok large float32', 'ok large float16', 'ok non-finite nan',
          'ok non-finite inf', 'ok optimizer', 'ok missing float32',
          'ok missing float16', 'ok broadcast float32',
          'ok broadcast float16']


@pytest.mark.parametrize('n_workers', [1, 2])
def test_contract_range_and_non_finite_check(mpirun, n_workers):
    if gpu_marks.gpu_count() < n_workers:
        pytest.skip('needs {} GPUs, {} visible'.format(
            n_workers, gpu_marks.gpu_count()))
    proc = mpirun(n_workers, ['tests/mpi_scripts/comm_pure_nccl_fp16.py'],
                  env=gpu_marks.child_env())
    lines = proc.stdout.splitlines()
    for check in CHECKS:
        assert lines.count(check) == n_workers, (check, proc.stdout)
