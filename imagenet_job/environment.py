"""The worker's environment, checked before MPI starts.

Open MPI does not start without ``HOME`` (it aborts in ``MPI_Init``), and a
one-process run (no launcher: MPI starts as a singleton) creates its session
directory in ``TMPDIR`` (else ``TEMP``, ``TMP``, ``/tmp``), segfaulting
where it cannot. Each ends the worker with one line naming the variable
(:class:`BadEnvironment`): MPI, not started, cannot be asked to end the job.
A ``HOME`` that cannot be written only moves matplotlib's and CuPy's caches
to a temporary directory, with a warning.
"""
import multiprocessing.util
import os
import shutil
import tempfile
import warnings

from largebatch import launchers
from largebatch.errors import InputError

#: Where Open MPI's singleton looks for its temporary directory, in order;
#: ``/tmp`` without any.
TEMPORARY_VARIABLES = ('TMPDIR', 'TEMP', 'TMP')

#: The variables of the caches that go below ``HOME`` unless set.
CACHE_VARIABLES = {'MPLCONFIGDIR': 'matplotlib', 'CUPY_CACHE_DIR': 'cupy'}


class BadEnvironment(InputError):
    """A variable of the worker's environment that MPI cannot start with."""


def check_environment(launched):
    """:class:`BadEnvironment` naming the first variable MPI cannot start
    with: a rank variable that holds no rank, ``HOME`` unset and, without a
    launcher (``launched`` False), a temporary directory where no directory
    can be created; a ``HOME`` where none can be is :func:`caches_elsewhere`.
    """
    try:
        rank = launchers.rank()
    except InputError as e:
        raise BadEnvironment(str(e)) from None
    home = os.environ.get('HOME')
    if not home:
        raise BadEnvironment('HOME is not set, and Open MPI does not start '
                             'without it; set HOME to your home directory')
    if not launched:
        name = next((name for name in TEMPORARY_VARIABLES
                     if name in os.environ), None)
        folder = os.environ[name] if name else '/tmp'
        problem = unwritable(folder)
        if problem:
            raise BadEnvironment(
                '{}: not a writable directory ({}); Open MPI keeps its '
                'session directory there: set TMPDIR to one'.format(
                    '{}={}'.format(name, folder) if name else folder,
                    problem))
    problem = unwritable(home)
    if problem:
        caches_elsewhere()
        if rank == 0:
            warnings.warn(
                'HOME={}: not a writable directory ({}); matplotlib\'s and '
                'CuPy\'s caches are temporary in this run: set HOME, or {}, '
                'to writable directories to keep them'.format(
                    home, problem, ' and '.join(sorted(CACHE_VARIABLES))))


def unwritable(folder):
    """Why no directory can be created in ``folder`` (``No such file or
    directory``, ``Permission denied``, ``No space left on device``...), or
    None where one can: what Open MPI and the caches do there."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix='.train_imagenet-', dir=folder))
    except OSError as e:
        return e.strerror or str(e)
    return None


def caches_elsewhere():
    """Point every cache of :data:`CACHE_VARIABLES` not set at a directory
    of its own in a temporary directory removed at exit (in a launched job,
    the job's session directory: its launcher removes it)."""
    unset = [name for name in CACHE_VARIABLES if name not in os.environ]
    if not unset:
        return
    root = tempfile.mkdtemp(prefix='train_imagenet-caches-')
    multiprocessing.util.Finalize(None, shutil.rmtree, args=(root, True),
                                  exitpriority=-100)
    for name in unset:
        os.environ[name] = os.path.join(root, CACHE_VARIABLES[name])
