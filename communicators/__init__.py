"""ChainerMN communicators, plus float16 gradient all-reduce on CPU and GPU.

Importing this package does not initialize MPI (importing ChainerMN's
communicator classes does), so a trainer can start its loaders' forkserver
first; the communicator classes are imported from their own modules.
"""
from communicators.factory import create_communicator  # NOQA
from communicators.factory import NAMES  # NOQA
from communicators.half_conversion import add_half  # NOQA
from communicators.half_conversion import to_float  # NOQA
from communicators.half_conversion import to_half  # NOQA
from communicators.ring_allreduce import HalfPrecisionRingAllreduce  # NOQA
from communicators.initial_broadcast import broadcast_initial_parameters  # NOQA
