"""imagenet_job.endings: how each failure ends the job (one line, exit
status), with stand-ins for MPI."""
import errno
import os
import re
import sys

import pytest

from imagenet_job import endings
from imagenet_job.agreement import JobInputError
from largebatch.errors import InputError
from largebatch.errors import NonFiniteGradientError


class Aborted(Exception):
    """What MPI_Abort does to a process: it does not come back."""


class FakeWorld(object):

    def __init__(self, rank, size=2):
        self.rank = rank
        self.size = size
        self.aborted = None

    def Abort(self, status):
        self.aborted = status
        raise Aborted(status)


@pytest.fixture
def world(monkeypatch):
    """Rank 0 of the job, with the script's name as sys.argv[0]. What an
    aborting process releases is recorded, not released: running the exit
    finalizers would switch off every later finalizer of the test
    process."""
    monkeypatch.setattr(sys, 'argv', ['/opt/job/train_imagenet.py'])
    fake = FakeWorld(0)
    fake.released = 0

    def release():
        fake.released += 1
    monkeypatch.setattr(endings, '_world', lambda: fake)
    monkeypatch.setattr(endings, '_release_local_resources', release)
    return fake


def end(error, out='result/run'):
    """Raises ``error`` inside ending_the_job; the exit status."""
    with pytest.raises(SystemExit) as info:
        with endings.ending_the_job(out):
            raise error
    return info.value.code


def stderr_lines(capsys):
    captured = capsys.readouterr()
    assert captured.out == ''
    return captured.err.splitlines()


@pytest.mark.parametrize('rank', [0, 1])
@pytest.mark.parametrize('error, status, line', [
    (JobInputError('--seed must be non-negative'), 2,
     'train_imagenet.py: error: --seed must be non-negative'),
    (NonFiniteGradientError(5, '/predictor/fc/W'), 3,
     'train_imagenet.py: error: all-reduced gradient diverged: 5 '
     'non-finite element(s), the first in /predictor/fc/W; the snapshots '
     'in result/run are untouched'),
    (endings.Stopped('stopped by SIGTERM after iteration 7'), 4,
     'train_imagenet.py: stopped by SIGTERM after iteration 7'),
])
def test_an_ending_every_worker_meets_exits_with_its_status_said_once(
        world, capsys, rank, error, status, line):
    """Bad input all found (2), divergence (3), a stop signal (4)."""
    world.rank = rank
    assert end(error, out='result/run') == status
    assert stderr_lines(capsys) == ([line] if rank == 0 else [])
    assert world.aborted is None and world.released == 0


def test_bad_input_of_one_worker_aborts_with_2(world, capsys):
    world.rank = 3
    with pytest.raises(Aborted):
        with endings.ending_the_job('out'):
            raise InputError('a.jpg: cannot be decoded')
    assert world.aborted == 2 and world.released == 1
    assert stderr_lines(capsys) == [
        'train_imagenet.py: error: worker 3: a.jpg: cannot be decoded']


def test_anything_else_prints_the_traceback_and_aborts_with_1(world, capsys):
    with pytest.raises(Aborted):
        with endings.ending_the_job('out'):
            raise ZeroDivisionError('a bug')
    assert world.aborted == 1 and world.released == 1
    err = capsys.readouterr().err
    assert err.startswith('Traceback')
    assert err.rstrip().endswith('ZeroDivisionError: a bug')


class OutOfMemoryError(MemoryError):
    """As CuPy's: a MemoryError with the allocation that failed."""


@pytest.mark.parametrize('error, said', [
    (OutOfMemoryError('Out of memory allocating 1,073,741,824 bytes '
                      '(allocated so far: 79,456,894,976 bytes).'),
     'Out of memory allocating 1,073,741,824 bytes (allocated so far: '
     '79,456,894,976 bytes)'),
    (MemoryError(), 'out of memory'),
])
def test_out_of_memory_on_one_worker_says_so_and_aborts_with_1(
        world, capsys, error, said):
    world.rank = 2
    with pytest.raises(Aborted):
        with endings.ending_the_job('out', out_of_memory_advice='use less'):
            raise error
    assert world.aborted == 1 and world.released == 1
    assert stderr_lines(capsys) == [
        'train_imagenet.py: error: worker 2: {}; use less'.format(said)]


def test_out_of_memory_of_a_job_of_one_process_exits_1(world, capsys):
    world.size = 1
    assert end(MemoryError('Unable to allocate 392. MiB')) == 1
    assert world.aborted is None
    assert stderr_lines(capsys) == [
        'train_imagenet.py: error: Unable to allocate 392. MiB']


def test_a_run_that_ends_well_is_left_alone(world, capsys):
    with endings.ending_the_job('out'):
        pass
    assert world.aborted is None
    assert capsys.readouterr() == ('', '')


def test_bad_input_of_a_job_of_one_process_exits_2(world, capsys):
    world.size = 1
    assert end(InputError('a.jpg: cannot be decoded')) == 2
    assert world.aborted is None  # MPI finalizes: nothing left in /dev/shm
    assert stderr_lines(capsys) == [
        'train_imagenet.py: error: a.jpg: cannot be decoded']


def test_a_refused_write_in_out_is_one_line_naming_the_file(tmp_path):
    out = str(tmp_path / 'run')
    log = os.path.join(out, 'log')
    with pytest.raises(InputError, match=r'^{}: cannot be written '
                       r'\(Read-only file system\); the snapshots written '
                       r'before it are intact$'.format(re.escape(log))):
        with endings.training(out):
            raise OSError(errno.EROFS, 'Read-only file system', log)
    elsewhere = OSError(errno.EIO, 'Input/output error', '/data/a.JPEG')
    with pytest.raises(OSError) as info:
        with endings.training(out):
            raise elsewhere
    assert info.value is elsewhere
