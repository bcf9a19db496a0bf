"""train_imagenet.py with one rank's memory capped: a real out-of-memory.

Once the communicator is up, rank RANK's address space is limited to its
size then plus HEADROOM bytes (``RLIMIT_AS``), so that its first large
allocation fails with NumPy's MemoryError, as CuPy's OutOfMemoryError would
on a GPU, while the other ranks go on into the collectives.
Usage: train_out_of_memory.py RANK HEADROOM [train_imagenet arguments...]
"""
import os
import runpy
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)

import address_space
from imagenet_job import devices

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'train_imagenet.py')
rank, headroom = int(sys.argv[1]), int(sys.argv[2])
create_communicator = devices.create_communicator


def capped_communicator(*args, **kwargs):
    comm, abilities = create_communicator(*args, **kwargs)
    if comm.rank == rank:
        address_space.cap(headroom)
    return comm, abilities


devices.create_communicator = capped_communicator
sys.argv = [SCRIPT] + sys.argv[3:]
runpy.run_path(SCRIPT, run_name='__main__')
