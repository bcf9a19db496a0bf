"""MPI started with the interpreter's lock released is the MPI mpi4py would
have started (communicators/mpi_start.py); the deadline it allows is tested
in tests/integration/test_reliability.py."""
import pytest

from conftest import run_mpi


@pytest.mark.parametrize('way', ['ctypes', 'fallback'])
def test_mpi_started_as_mpi4py_starts_it_and_finalized_at_exit(way):
    proc = run_mpi(2, ['tests/mpi_scripts/mpi_start.py', way], timeout=120)
    assert sorted(proc.stdout.splitlines()) == [
        '0 True True rank [0, 1]', '1 True True rank [0, 1]']
    # a worker that ends without MPI_Finalize makes mpiexec say so
    assert 'improperly' not in proc.stderr, proc.stderr[-2000:]
