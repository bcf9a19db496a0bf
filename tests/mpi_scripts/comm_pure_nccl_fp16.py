"""The pure_nccl_fp16 communicator, one GPU per worker: the float16
communicators' contract (fp16_contract.py).

Prints ``ok <check>`` for each check that passed on this rank.
"""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import chainermn

import communicators
from communicators.pure_nccl_fp16_communicator import \
    PureNcclFp16Communicator
import fp16_contract

chainermn.global_except_hook.add_hook()  # a failed check aborts every rank
comm = communicators.create_communicator('pure_nccl', 'float16',
                                         gpu=True)
assert type(comm) is PureNcclFp16Communicator
device = chainer.get_device('@cupy:{}'.format(comm.intra_rank))
device.use()
fp16_contract.run(comm, device)
