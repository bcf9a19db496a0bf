"""train_imagenet.py on an MPI library that gives MPI_THREAD_SERIALIZED (an
MPICH built to serialize threads), emulated: mpi4py's ``Query_thread`` says
so; MPI itself starts as the trainer starts it.

Usage: serialized_mpi_train.py TRAIN_IMAGENET_ARGUMENTS...
"""
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import mpi4py

mpi4py.rc.initialize = False  # as communicators.start_mpi imports it
mpi4py.rc.finalize = True
from mpi4py import MPI  # NOQA: E402

MPI.Query_thread = lambda: MPI.THREAD_SERIALIZED

import train_imagenet  # NOQA: E402

sys.argv[0] = 'train_imagenet.py'
train_imagenet.main(sys.argv[1:])
