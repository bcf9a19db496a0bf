"""The pure_nccl_fp16 gradient mean on 1 GPU, and on 2 where there are 2.

With 2 workers the script's gradients of 4e4 would overflow float16
(max 65504) if they were summed before the 1 / workers scaling.
"""
import pytest

import gpu_marks

pytestmark = gpu_marks.GPU


@pytest.mark.parametrize('n_workers', [1, 2])
def test_mean_range_and_non_finite_check(mpirun, n_workers):
    if gpu_marks.gpu_count() < n_workers:
        pytest.skip('needs {} GPUs, {} visible'.format(
            n_workers, gpu_marks.gpu_count()))
    proc = mpirun(n_workers, ['tests/mpi_scripts/comm_pure_nccl_fp16.py'],
                  env=gpu_marks.child_env())
    lines = proc.stdout.splitlines()
    for check in ('ok mean', 'ok large', 'ok non-finite'):
        assert lines.count(check) == n_workers, (check, proc.stdout)
