"""job: agreeing on bad input, and how each failure ends
the job (one line, exit status), with stand-ins for MPI."""
import sys

import pytest

import communicators
import job
from errors import InputError
from errors import NonFiniteGradientError
from errors import ParameterError


class FakeComm(object):
    """A ChainerMN communicator of rank ``rank`` whose ``mpi_comm.allgather``
    returns what every rank gave: this one's, and ``others`` in rank order.
    """

    def __init__(self, rank, others):
        self.rank = rank
        self.mpi_comm = self
        self.others = list(others)
        self.gathered = []

    def allgather(self, value):
        self.gathered.append(value)
        return self.others[:self.rank] + [value] + self.others[self.rank:]


def test_agree_returns_the_check_when_every_worker_passes():
    comm = FakeComm(1, [None, None])
    assert job.agree(comm, lambda a, b: a + b, 2, 3) == 5
    assert comm.gathered == [None]


def test_agree_raises_this_workers_failure_everywhere():
    def check():
        raise InputError('train.txt:3: label 10 out of range')
    comm = FakeComm(0, [None])
    with pytest.raises(job.JobInputError,
                       match=r'^train.txt:3: label 10 out of range$'):
        job.agree(comm, check)
    assert comm.gathered == ['train.txt:3: label 10 out of range']


def test_agree_raises_the_first_failure_of_another_worker():
    comm = FakeComm(2, [None, 'rank 1 failed', 'rank 3 failed'])
    with pytest.raises(job.JobInputError, match='^rank 1 failed$'):
        job.agree(comm, lambda: 'fine')
    assert issubclass(job.JobInputError, InputError)


def test_agree_raises_other_errors_after_the_others_learn_of_them():
    def check():
        raise KeyError('bug')
    comm = FakeComm(1, [None])
    with pytest.raises(KeyError):
        job.agree(comm, check)
    # what the other workers received instead of waiting for this one
    assert comm.gathered == ["worker 1 failed (KeyError: 'bug')"]
    other = FakeComm(0, [comm.gathered[0]])
    with pytest.raises(job.JobInputError,
                       match=r"^worker 1 failed \(KeyError: 'bug'\)$"):
        job.agree(other, lambda: 'fine')


def test_node_ranks_names_each_nodes_ranks_in_order():
    from mpi4py import MPI
    here = MPI.Get_processor_name()
    comm = FakeComm(0, ['n2', 'n2', 'n3', 'n2', here])
    assert job.node_ranks(comm.mpi_comm) == (
        'nodes: {0} ranks 0,5, n2 ranks 1-2,4, n3 ranks 3'.format(here))


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
    monkeypatch.setattr(job, '_world', lambda: fake)
    monkeypatch.setattr(job, '_release_local_resources', release)
    return fake


def end(error, out='result/run'):
    """Raises ``error`` inside ending_the_job; the exit status."""
    with pytest.raises(SystemExit) as info:
        with job.ending_the_job(out):
            raise error
    return info.value.code


def stderr_lines(capsys):
    captured = capsys.readouterr()
    assert captured.out == ''
    return captured.err.splitlines()


@pytest.mark.parametrize('rank', [0, 1])
@pytest.mark.parametrize('error, status, line', [
    (job.JobInputError('--seed must be non-negative'), 2,
     'train_imagenet.py: error: --seed must be non-negative'),
    (NonFiniteGradientError(5, '/predictor/fc/W'), 3,
     'train_imagenet.py: error: all-reduced gradient diverged: 5 '
     'non-finite element(s), the first in /predictor/fc/W; the snapshots '
     'in result/run are untouched'),
    (job.Stopped('stopped by SIGTERM after iteration 7'), 4,
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
        with job.ending_the_job('out'):
            raise InputError('a.jpg: cannot be decoded')
    assert world.aborted == 2 and world.released == 1
    assert stderr_lines(capsys) == [
        'train_imagenet.py: error: worker 3: a.jpg: cannot be decoded']


def test_anything_else_prints_the_traceback_and_aborts_with_1(world, capsys):
    with pytest.raises(Aborted):
        with job.ending_the_job('out'):
            raise ZeroDivisionError('a bug')
    assert world.aborted == 1 and world.released == 1
    err = capsys.readouterr().err
    assert err.startswith('Traceback')
    assert err.rstrip().endswith('ZeroDivisionError: a bug')


@pytest.mark.parametrize('name, dtype, need_nccl', [
    (None, 'float16', True), ('pure_nccl', 'float32', True),
    ('non_cuda_aware', 'float32', True), ('naive', 'float32', False),
    ('flat', 'float32', False)])
def test_the_gpu_stack_is_checked_for_nccl_where_the_communicator_needs_it(
        monkeypatch, name, dtype, need_nccl):
    checked, built = [], []
    world = FakeWorld(0)
    monkeypatch.setattr(job, '_world', lambda: world)
    monkeypatch.setattr(job, 'check_gpu_stack',
                        lambda comm, flag, allow, need, requested:
                        checked.append((comm, flag, need, requested)))
    monkeypatch.setattr(communicators, 'create_communicator',
                        lambda *args, **kwargs: built.append(args))
    job.create_communicator(name, dtype, False, gpu_flag='--gpu')
    assert checked == [(world, '--gpu', need_nccl, None)]
    assert built == [(name or 'pure_nccl', dtype)]


class Workers(object):
    """The MPI communicator of ``hosts`` (one per rank) as rank ``rank``
    sees it: ``allgather`` returns this rank's value and, for the others,
    what ``others`` gives them in turn (one list per collective). The host
    name of the process is ``hosts[rank]``."""

    def __init__(self, monkeypatch, rank, hosts, others):
        self.rank, self.size = rank, len(hosts)
        self.gathers = [hosts] + others
        monkeypatch.setattr(job.socket, 'gethostname', lambda: hosts[rank])

    def allgather(self, value):
        gathered = list(self.gathers.pop(0))
        gathered[self.rank] = value
        return gathered


def checking(monkeypatch, cause=None, cudnn_off=False):
    """``cuda_stack.check`` that fails here with ``cause``; the calls."""
    import cuda_stack
    calls = []

    def check(allow_no_cudnn, need_nccl, intra_rank, requested):
        calls.append((intra_rank, requested))
        if cause:
            raise (cuda_stack.CudnnOffError if cudnn_off else InputError)(
                cause)
    monkeypatch.setattr(cuda_stack, 'check', check)
    monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)
    return calls


def test_a_gpu_stack_failing_on_one_worker_ends_every_worker(monkeypatch):
    # worker 2 (the second on n2) fails; worker 0 learns of it
    calls = checking(monkeypatch)
    failure = ('worker 2 on n2, GPU 1 (CUDA_VISIBLE_DEVICES=unset): no GPU '
               'is visible (cudaErrorNoDevice)')
    workers = Workers(monkeypatch, 0, ['n1', 'n2', 'n2'],
                      [[None, None, failure]])
    with pytest.raises(job.JobInputError) as e:
        job.check_gpu_stack(workers, '--gpu', False, True)
    assert str(e.value) == '--gpu: ' + failure
    assert calls == [(0, None)]


def test_the_failing_worker_names_itself_its_node_and_gpu(monkeypatch):
    calls = checking(monkeypatch, 'no GPU is visible (cudaErrorNoDevice)')
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '0,1')
    workers = Workers(monkeypatch, 2, ['n1', 'n2', 'n2'], [[None, None, None]])
    with pytest.raises(job.JobInputError, match=(
            r'^--device: worker 2 on n2, GPU 3 \(CUDA_VISIBLE_DEVICES=0,1\): '
            r'no GPU is visible \(cudaErrorNoDevice\)$')):
        job.check_gpu_stack(workers, '--device', False, True, requested=3)
    assert calls == [(1, 3)]


def test_every_worker_failing_is_one_line_with_the_others_ranks(
        monkeypatch):
    checking(monkeypatch, 'cuDNN is off (CuPy 14.2.0 has none)',
             cudnn_off=True)
    workers = Workers(monkeypatch, 0, ['n1'] * 4, [[None, 'b', None, 'd']])
    with pytest.raises(job.JobInputError, match=(
            r'^--gpu: worker 0 on n1, GPU 0 \(CUDA_VISIBLE_DEVICES=unset\): '
            r'cuDNN is off \(CuPy 14.2.0 has none\), or pass '
            r'--allow-no-cudnn to train without it; workers 1,3 failed it '
            r'too$')):
        job.check_gpu_stack(workers, '--gpu', False, True)


def test_a_job_of_one_process_says_only_the_cause(monkeypatch):
    checking(monkeypatch, 'no GPU is visible (cudaErrorNoDevice)')
    with pytest.raises(job.JobInputError, match=(
            r'^--gpu: no GPU is visible \(cudaErrorNoDevice\)$')):
        job.check_gpu_stack(Workers(monkeypatch, 0, ['n1'], [[None]]), '--gpu',
                            True, False)


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
        with job.ending_the_job('out', out_of_memory_advice='use less'):
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
    with job.ending_the_job('out'):
        pass
    assert world.aborted is None
    assert capsys.readouterr() == ('', '')


def test_bad_input_of_a_job_of_one_process_exits_2(world, capsys):
    world.size = 1
    assert end(InputError('a.jpg: cannot be decoded')) == 2
    assert world.aborted is None  # MPI finalizes: nothing left in /dev/shm
    assert stderr_lines(capsys) == [
        'train_imagenet.py: error: a.jpg: cannot be decoded']


@pytest.mark.parametrize('error, flag, expected', [
    (ParameterError('val_batchsize', 0, 'positive'), None,
     (job.JobInputError, '--val-batchsize must be positive, got 0')),
    (InputError('m.npy: no such file'), '--mean',
     (InputError, '--mean m.npy: no such file')),
    (job.JobInputError('s: damaged'), '--resume',
     (job.JobInputError, '--resume s: damaged')),
    (ValueError("unknown communicator 'x'"), '--communicator x',
     (job.JobInputError, "--communicator x: unknown communicator 'x'")),
])
def test_naming_names_the_flag_one_way(error, flag, expected):
    """A setting names its own flag, a value's error gets the flag that gave
    it; an error every worker met together stays one."""
    with pytest.raises(InputError) as info:
        with job.naming(flag):
            raise error
    assert (type(info.value), str(info.value)) == expected


def test_a_warning_is_one_line_as_the_errors_are(monkeypatch):
    monkeypatch.setattr(sys, 'argv', ['/x/train_imagenet.py'])
    assert job.one_line_warning(
        UserWarning('skipping damaged snapshot out/snapshot_iter_9'),
        UserWarning, '/x/extensions/snapshots.py', 104) == (
        'train_imagenet.py: warning: skipping damaged snapshot '
        'out/snapshot_iter_9\n')
