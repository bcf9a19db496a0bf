"""How a failure on one worker or on all of them ends the MPI job.

- Bad input found while starting: :func:`agree` runs each worker's checks
  and gathers their failures, so every worker raises the same
  :class:`errors.InputError`; rank 0 prints its one line and every worker
  exits 2.
- Bad input met by one worker while training (an undecodable image): that
  worker prints one line naming its rank and aborts the job with status 2.
- A non-finite all-reduced gradient (:class:`errors.NonFiniteGradientError`,
  a ``ValueError`` but not bad input): every worker raises together; rank 0
  prints its one line and every worker exits 3, leaving the snapshots as
  they are.
- A stop signal (SIGTERM or SIGUSR1, :mod:`extensions.signal_stop`): every
  worker stops after the same update, rank 0 saves its snapshot and prints
  one line, and every worker exits 4.
- Anything else: the traceback, then an abort with status 1, so that no
  worker is left blocked in a collective.
- A node lost (power, network): its workers vanish without a word, and the
  others wait in a collective until the launcher ends the job. Rank 0 prints
  :func:`node_ranks` at the start, so that the job scripts can name the lost
  node's ranks (jobs/mpi_quiet.sh).

A job of one process ends with its status instead of an abort, so that MPI
finalizes and removes its shared-memory files.
"""
import contextlib
import multiprocessing.util
import os
import shutil
import sys
import tempfile
import traceback
import weakref

from errors import DIVERGED_STATUS
from errors import STOPPED_STATUS
from errors import InputError
from errors import NonFiniteGradientError
from errors import ParameterError
import processes


class JobInputError(InputError):
    """Bad input that every worker has raised together (see :func:`agree`).
    """


class Stopped(Exception):
    """Every worker stopped together on a signal, after a snapshot."""


def agree(comm, check, *args, **kwargs):
    """``check(*args, **kwargs)`` on every worker; if it raised
    :class:`InputError` on any, :class:`JobInputError` with the first message
    on all of them."""
    result, failure = None, None
    try:
        result = check(*args, **kwargs)
    except InputError as e:
        failure = str(e)
    failures = [f for f in comm.mpi_comm.allgather(failure) if f]
    if failures:
        raise JobInputError(failures[0])
    return result


@contextlib.contextmanager
def flag_errors(flag=None):
    """Turns a library's ``ValueError`` into :class:`JobInputError` naming
    the command-line ``flag``; a :class:`ParameterError` names its own flag
    (``lr`` -> ``--lr``). For checks that every worker makes alike."""
    try:
        yield
    except ParameterError as e:
        raise JobInputError('--{} must be {}, got {}'.format(
            e.name.replace('_', '-'), e.expected, e.value))
    except ValueError as e:
        raise JobInputError('{}: {}'.format(flag, e) if flag else str(e))


def _ranges(ranks):
    """[0, 1, 2, 5] -> '0-2,5'."""
    runs = []
    for rank in ranks:
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return ','.join(str(a) if a == b else '{}-{}'.format(a, b)
                    for a, b in runs)


def node_ranks(mpi_comm):
    """One line naming the ranks on each node, in rank order, gathered from
    every worker: ``nodes: node1 ranks 0-1, node2 ranks 2-3``."""
    from mpi4py import MPI
    hosts = mpi_comm.allgather(MPI.Get_processor_name())
    ranks = {}
    for rank, host in enumerate(hosts):
        ranks.setdefault(host, []).append(rank)
    return 'nodes: ' + ', '.join('{} ranks {}'.format(host, _ranges(r))
                                 for host, r in ranks.items())


#: Temporary folders of processes whose session folder is unusable start with
#: this and the process's id.
PRIVATE_TEMP_PREFIX = 'train_imagenet-'


def use_the_jobs_session_directory():
    """Put this process's temporary files (multiprocessing's folder with the
    loaders' forkserver socket) in the folder that Open MPI's launcher
    gives it and removes when the job ends, however it ends; a process
    that MPI_Abort ends cannot remove its own.

    A forkserver's socket, SESSION/pymp-XXXXXXXX/listener-XXXXXXXX, must fit
    the 107 bytes of an AF_UNIX path; where the session folder's path is too
    long (a long host name, a deep TMPDIR), the files go to a folder of this
    process's own in the system's temporary folder instead, removed at exit
    and, after a kill, by the next process that starts or ends there.
    """
    session = os.environ.get('OMPI_FILE_LOCATION')
    if not session or not os.path.isdir(session):
        return
    if len(session) < 72:
        tempfile.tempdir = session
        return
    root = tempfile.gettempdir()
    _remove_private_temp_dirs(root)
    tempfile.tempdir = tempfile.mkdtemp(
        prefix='{}{}-'.format(PRIVATE_TEMP_PREFIX, os.getpid()), dir=root)
    multiprocessing.util.Finalize(None, _remove_private_temp_dirs,
                                  args=(root, tempfile.tempdir),
                                  exitpriority=-100)


def _remove_private_temp_dirs(root, own=None):
    """Remove folder ``own`` and the private folders in ``root`` of
    processes that no longer run."""
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)
    for name in os.listdir(root):
        pid = name[len(PRIVATE_TEMP_PREFIX):].split('-')[0]
        if name.startswith(PRIVATE_TEMP_PREFIX) and pid.isdigit() and \
                not processes.runs(int(pid)):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _world():
    from mpi4py import MPI  # imported late: MPI starts after the loaders
    return MPI.COMM_WORLD


def _error(message):
    print('{}: error: {}'.format(os.path.basename(sys.argv[0]), message),
          file=sys.stderr)
    sys.stderr.flush()


@contextlib.contextmanager
def ending_the_job(out):
    """Turns the failures above into their one line and exit status;
    ``out`` is the output directory that a divergence leaves untouched."""
    try:
        yield
    except JobInputError as e:
        if _world().rank == 0:
            _error(e)
        sys.exit(2)
    except InputError as e:
        _error('worker {}: {}'.format(_world().rank, e)
               if _world().size > 1 else e)
        _abort(2)
    except NonFiniteGradientError as e:
        if _world().rank == 0:
            _error('{}; the snapshots in {} are untouched'.format(e, out))
        sys.exit(DIVERGED_STATUS)
    except Stopped as e:
        if _world().rank == 0:
            print('{}: {}'.format(os.path.basename(sys.argv[0]), e),
                  file=sys.stderr, flush=True)
        sys.exit(STOPPED_STATUS)
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        _abort(1)


def _abort(status):
    """End the whole job with ``status``: a plain exit when this process is
    the job, else ``MPI_Abort``, so that no worker waits in a collective."""
    if _world().size == 1:
        sys.exit(status)
    _release_local_resources()
    _world().Abort(status)


def _release_local_resources():
    """What this process would release at exit and MPI_Abort skips: the
    loaders, multiprocessing's temporary folders, the shared-memory index."""
    try:
        multiprocessing.util._exit_function()
        weakref.finalize._exitfunc()
    except Exception:  # the abort must happen whatever fails here
        pass
