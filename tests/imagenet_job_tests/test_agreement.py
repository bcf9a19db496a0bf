"""imagenet_job.agreement: agreeing on bad input, and naming its flag, with
a stand-in for MPI."""
import pytest

from fake_comm import FakeComm
from imagenet_job import agreement
from largebatch.errors import InputError
from largebatch.errors import ParameterError


def test_agree_returns_the_check_when_every_worker_passes():
    comm = FakeComm(1, [None, None])
    assert agreement.agree(comm, lambda a, b: a + b, 2, 3) == 5
    assert comm.gathered == [None]


def test_agree_raises_this_workers_failure_everywhere():
    def check():
        raise InputError('train.txt:3: label 10 out of range')
    comm = FakeComm(0, [None])
    with pytest.raises(agreement.JobInputError,
                       match=r'^train.txt:3: label 10 out of range$'):
        agreement.agree(comm, check)
    assert comm.gathered == ['train.txt:3: label 10 out of range']


def test_agree_raises_the_first_failure_of_another_worker():
    comm = FakeComm(2, [None, 'rank 1 failed', 'rank 3 failed'])
    with pytest.raises(agreement.JobInputError, match='^rank 1 failed$'):
        agreement.agree(comm, lambda: 'fine')
    assert issubclass(agreement.JobInputError, InputError)


def test_agree_raises_other_errors_after_the_others_learn_of_them():
    def check():
        raise KeyError('bug')
    comm = FakeComm(1, [None])
    with pytest.raises(KeyError):
        agreement.agree(comm, check)
    # what the other workers received instead of waiting for this one
    assert comm.gathered == ["worker 1 failed (KeyError: 'bug')"]
    other = FakeComm(0, [comm.gathered[0]])
    with pytest.raises(agreement.JobInputError,
                       match=r"^worker 1 failed \(KeyError: 'bug'\)$"):
        agreement.agree(other, lambda: 'fine')


@pytest.mark.parametrize('error, flag, expected', [
    (ParameterError('val_batchsize', 0, 'positive'), None,
     (agreement.JobInputError, '--val-batchsize must be positive, got 0')),
    (InputError('m.npy: no such file'), '--mean',
     (InputError, '--mean m.npy: no such file')),
    (agreement.JobInputError('s: damaged'), '--resume',
     (agreement.JobInputError, '--resume s: damaged')),
    (ValueError("unknown communicator 'x'"), '--communicator x',
     (agreement.JobInputError, "--communicator x: unknown communicator 'x'")),
])
def test_naming_names_the_flag_one_way(error, flag, expected):
    """A setting names its own flag, a value's error gets the flag that gave
    it; an error every worker met together stays one."""
    with pytest.raises(InputError) as info:
        with agreement.naming(flag):
            raise error
    assert (type(info.value), str(info.value)) == expected
