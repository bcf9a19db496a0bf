"""MPI started with the interpreter's lock released.

mpi4py starts MPI (``MPI_Init_thread``) while it is imported, holding the
interpreter's lock, and MPI's start-up waits for every worker: a worker
stopped before it keeps the others there with no Python thread able to run,
so no deadline (:func:`extensions.start_deadline`) could end the job. Here
mpi4py is imported without starting MPI, ``MPI_Init_thread`` is called
through ctypes (which releases the lock during the call), and what mpi4py's
own start-up adds is done after it: errors raise (``MPI_ERRORS_RETURN`` on
the predefined communicators) and MPI is finalized at exit.
"""
import ctypes
import sys


def start_mpi():
    """mpi4py's ``MPI`` module, with MPI started (at the thread level mpi4py
    asks for, ``MPI_THREAD_MULTIPLE``). An mpi4py whose module does not
    resolve ``MPI_Init_thread`` starts MPI its own way."""
    import mpi4py
    if 'mpi4py.MPI' not in sys.modules:
        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = True
    from mpi4py import MPI
    if MPI.Is_initialized():
        return MPI
    init = getattr(library(MPI), 'MPI_Init_thread', None)
    if init is None:
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
        return MPI
    init.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                     ctypes.POINTER(ctypes.c_int))
    provided = ctypes.c_int()
    status = init(None, None, MPI.THREAD_MULTIPLE, ctypes.byref(provided))
    if status != MPI.SUCCESS:
        raise MPI.Exception(status)
    for comm in (MPI.COMM_SELF, MPI.COMM_WORLD):
        comm.Set_errhandler(MPI.ERRORS_RETURN)
    return MPI


def library(MPI):
    """The MPI library that mpi4py's module ``MPI`` linked, through ctypes
    (its symbols resolve through the module's own handle), or None."""
    try:
        return ctypes.CDLL(MPI.__file__)
    except OSError:
        return None
