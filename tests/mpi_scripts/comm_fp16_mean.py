"""The mpi_fp16 communicator on N workers: the float16 communicators'
contract (fp16_contract.py), ChainerMN's API, the factory.

Prints ``ok <check>`` for each check that passed on this rank.
"""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import chainermn
from chainermn.communicators.naive_communicator import NaiveCommunicator

import communicators
from communicators.mpi_fp16_communicator import MpiFp16Communicator
import fp16_contract

chainermn.global_except_hook.add_hook()  # a failed check aborts every rank
comm = communicators.create_communicator('mpi_fp16')
rank, size = comm.rank, comm.size


def check_chainermn_api():
    assert isinstance(comm, NaiveCommunicator)
    assert type(comm.split(rank % 2, rank)) is type(comm)
    assert comm.allreduce_obj(1) == size
    assert comm.bcast_obj('root' if rank == 0 else None) == 'root'
    shard = chainermn.scatter_dataset(list(range(2 * size)), comm)
    assert len(shard) == 2
    print('ok api')


def check_factory():
    make = communicators.create_communicator
    assert type(make('naive', 'float16')) is MpiFp16Communicator
    assert type(make('mpi_fp16')) is MpiFp16Communicator
    assert type(make('naive')) is NaiveCommunicator
    try:
        make('flat', 'float16')
    except ValueError as e:
        assert 'flat' in str(e) and '\n' not in str(e)
    else:
        raise AssertionError('flat accepted float16')
    print('ok factory')


fp16_contract.run(comm, chainer.get_device('@numpy'))
check_chainermn_api()
check_factory()
