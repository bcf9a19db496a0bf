"""The pure_nccl_fp16 communicator's all-reduce and broadcast, run as
written on 2 and 3 CPU workers with NCCL, the stream, the device buffer and
the kernels standing in on the host
(tests/mpi_scripts/comm_pure_nccl_fp16_on_host.py): the float16
communicators' contract, and the mean bit for bit."""
import os

import pytest

try:  # its NCCL constants; ChainerMN's NCCL communicator imports it
    import cupy  # NOQA: F401
except ImportError as e:  # the CPU venv
    if os.environ.get('REQUIRE_CUPY') == '1':
        raise
    pytest.skip('no CuPy ({}): make test-gpu-offline runs these'.format(e),
                allow_module_level=True)

# fp16_contract.CHECKS, then the script's own
CHECKS = ['ok mean float32', 'ok mean float16', 'ok magnitudes',
          'ok large float32', 'ok large float16', 'ok non-finite nan',
          'ok non-finite inf', 'ok optimizer', 'ok missing float32',
          'ok missing float16', 'ok broadcast float32',
          'ok broadcast float16', 'ok exact float32', 'ok exact float16']


@pytest.mark.parametrize('n_workers', [2, 3])
def test_contract_and_exact_mean_on_host(mpirun, n_workers, tmp_path):
    proc = mpirun(n_workers, ['tests/mpi_scripts/'
                              'comm_pure_nccl_fp16_on_host.py',
                              str(tmp_path)],
                  env={'OMPI_MCA_btl': 'self,sm'})
    lines = proc.stdout.splitlines()
    for check in CHECKS:
        assert lines.count(check) == n_workers, (check, proc.stdout)
