"""Each worker starts MPI through communicators.start_mpi (``fallback``:
with ctypes unable to load mpi4py's module) and prints what mpi4py's own
start-up would have given it, as ``rank thread-level errors-return raised``,
then ends normally (MPI is finalized at exit).

Usage: mpi_start.py ctypes|fallback
"""
import sys
import types

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)

from communicators import mpi_start
from communicators import start_mpi


def no_library(name):
    raise OSError('{}: cannot open shared object file'.format(name))


if sys.argv[1] == 'fallback':
    mpi_start.ctypes = types.SimpleNamespace(CDLL=no_library)
MPI = start_mpi()
assert start_mpi() is MPI  # started once
world = MPI.COMM_WORLD
try:
    world.Send(b'x', dest=world.size)  # no such rank
    raised = 'no'
except MPI.Exception as e:
    raised = 'rank' if e.Get_error_class() == MPI.ERR_RANK else 'other'
print(world.rank, MPI.Query_thread() == MPI.THREAD_MULTIPLE,
      world.Get_errhandler() == MPI.ERRORS_RETURN
      and MPI.COMM_SELF.Get_errhandler() == MPI.ERRORS_RETURN, raised,
      world.allgather(world.rank), flush=True)
