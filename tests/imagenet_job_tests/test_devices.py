"""imagenet_job.devices: the CUDA stack checked on every worker before the
communicator, its failure one line naming the worker, node and GPU."""
import types

import pytest

import communicators
from imagenet_job import devices
from imagenet_job.agreement import JobInputError
from largebatch.errors import InputError


@pytest.mark.parametrize('name, dtype, need_nccl', [
    (None, 'float16', True), ('pure_nccl', 'float32', True),
    ('non_cuda_aware', 'float32', True), ('naive', 'float32', False),
    ('flat', 'float32', False)])
def test_the_gpu_stack_is_checked_for_nccl_where_the_communicator_needs_it(
        monkeypatch, name, dtype, need_nccl):
    checked, built = [], []
    world = object()
    monkeypatch.setattr(communicators, 'start_mpi',
                        lambda: types.SimpleNamespace(COMM_WORLD=world))
    monkeypatch.setattr(devices, 'check_gpu_stack',
                        lambda comm, flag, allow, need, requested:
                        checked.append((comm, flag, need, requested)))
    monkeypatch.setattr(communicators, 'create_communicator',
                        lambda *args, **kwargs: built.append(args))
    devices.create_communicator(name, dtype, False, gpu_flag='--gpu')
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
        monkeypatch.setattr(devices.socket, 'gethostname', lambda: hosts[rank])

    def allgather(self, value):
        gathered = list(self.gathers.pop(0))
        gathered[self.rank] = value
        return gathered


def checking(monkeypatch, cause=None, cudnn_off=False):
    """``cuda_stack.check`` that fails here with ``cause``; the calls."""
    from largebatch import cuda_stack
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
    with pytest.raises(JobInputError) as e:
        devices.check_gpu_stack(workers, '--gpu', False, True)
    assert str(e.value) == '--gpu: ' + failure
    assert calls == [(0, None)]


def test_the_failing_worker_names_itself_its_node_and_gpu(monkeypatch):
    calls = checking(monkeypatch, 'no GPU is visible (cudaErrorNoDevice)')
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '0,1')
    workers = Workers(monkeypatch, 2, ['n1', 'n2', 'n2'], [[None, None, None]])
    with pytest.raises(JobInputError, match=(
            r'^--device: worker 2 on n2, GPU 3 \(CUDA_VISIBLE_DEVICES=0,1\): '
            r'no GPU is visible \(cudaErrorNoDevice\)$')):
        devices.check_gpu_stack(workers, '--device', False, True, requested=3)
    assert calls == [(1, 3)]


def test_every_worker_failing_is_one_line_with_the_others_ranks(
        monkeypatch):
    checking(monkeypatch, 'cuDNN is off (CuPy 14.2.0 has none)',
             cudnn_off=True)
    workers = Workers(monkeypatch, 0, ['n1'] * 4, [[None, 'b', None, 'd']])
    with pytest.raises(JobInputError, match=(
            r'^--gpu: worker 0 on n1, GPU 0 \(CUDA_VISIBLE_DEVICES=unset\): '
            r'cuDNN is off \(CuPy 14.2.0 has none\), or pass '
            r'--allow-no-cudnn to train without it; workers 1,3 failed it '
            r'too$')):
        devices.check_gpu_stack(workers, '--gpu', False, True)


def test_a_job_of_one_process_says_only_the_cause(monkeypatch):
    checking(monkeypatch, 'no GPU is visible (cudaErrorNoDevice)')
    with pytest.raises(JobInputError, match=(
            r'^--gpu: no GPU is visible \(cudaErrorNoDevice\)$')):
        devices.check_gpu_stack(Workers(monkeypatch, 0, ['n1'], [[None]]),
                                '--gpu', True, False)
