"""ChainerMN communicators, plus float16 gradient all-reduce on CPU and GPU.

Importing this package loads neither the CPU's float16 conversions and ring
(``mpi_fp16``'s) nor starts MPI (:func:`start_mpi` does, and importing
ChainerMN's communicator classes), so a trainer can start its loaders'
forkserver first; the communicator classes are imported from their own
modules.
"""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from communicators.factory import abilities  # NOQA
from communicators.factory import Abilities  # NOQA
from communicators.factory import create_communicator  # NOQA
from communicators.factory import NAMES  # NOQA
from communicators.factory import NCCL_NAMES  # NOQA
from communicators.factory import resolve_name  # NOQA
from communicators.initial_broadcast import broadcast_initial_parameters  # NOQA
from communicators.mpi_start import check_thread_level  # NOQA
from communicators.mpi_start import start_mpi  # NOQA
