"""How a failure on one worker or on all of them ends the MPI job.

- A worker's environment that MPI cannot start with
  (:mod:`imagenet_job.environment`): that worker prints its one line and
  exits 2, before MPI starts.
- Bad input found while starting (:mod:`imagenet_job.agreement`): every
  worker raises the same :class:`JobInputError`; rank 0 prints its one line
  and every worker exits 2.
- Bad input met by one worker while training (an undecodable image): that
  worker prints one line naming its rank and aborts the job with status 2.
- A non-finite all-reduced gradient (:class:`NonFiniteGradientError`, a
  ``ValueError`` but not bad input): every worker raises together; rank 0
  prints its one line and every worker exits 3, leaving the snapshots as
  they are.
- A stop signal (SIGTERM or SIGUSR1, :mod:`imagenet_job.signal_stop`): every
  worker stops after the same update, rank 0 saves its snapshot and prints
  one line, and every worker exits 4.
- Out of memory (NumPy's MemoryError, CuPy's ``OutOfMemoryError`` and the
  CPU engine's oneDNN out of memory, which are ones): each worker that ran
  out prints one line naming its rank, the allocation that failed and the
  caller's advice, and aborts the job with status 1. (The Linux OOM killer
  ends a process without a word: on CPUs only an allocation the kernel
  refuses at once gets here.)
- A loader process that died (:class:`LoaderDiedError`: the OOM killer's,
  or a crash): its worker prints one line naming its rank and the caller's
  advice, and aborts the job with status 1.
- Anything else: the traceback, then an abort with status 1, so that no
  worker is left blocked in a collective.
- A worker frozen (SIGSTOP, a frozen node), hung, or blocked in a read in
  any phase, or one that cannot stop on a signal: the stall
  watchdog (:mod:`imagenet_job.stall_watchdog`, from just after the
  communicator is made to the worker's end; before it, the start's
  deadline) ends the job with one line and status 5.
- A node lost (power, network): its workers vanish without a word, and the
  others wait in a collective until the launcher ends the job. Rank 0 prints
  the ranks of each node at the start (:func:`imagenet_job.nodes.
  node_ranks`), so that the job scripts can name the lost node's ranks
  (jobs/mpi_quiet.sh).

A job of one process ends with its status instead of an abort, so that MPI
finalizes and removes its shared-memory files.
"""
import contextlib
import errno
import multiprocessing.util
import os
import sys
import traceback
import weakref

import communicators
from image_data.decoding import UndecodableImageError
from imagenet_job import run_directory
from imagenet_job.agreement import JobInputError
from imagenet_job.environment import BadEnvironment
from largebatch.errors import DIVERGED_STATUS
from largebatch.errors import InputError
from largebatch.errors import LoaderDiedError
from largebatch.errors import NonFiniteGradientError
from largebatch.errors import out_of_memory_text
from largebatch.errors import STOPPED_STATUS


class Stopped(Exception):
    """Every worker stopped together on a signal, after a snapshot."""


def _world():
    return communicators.start_mpi().COMM_WORLD  # after the loaders' start


def _error(message):
    print('{}: error: {}'.format(os.path.basename(sys.argv[0]), message),
          file=sys.stderr)
    sys.stderr.flush()


@contextlib.contextmanager
def ending_the_job(out, out_of_memory_advice=None, loader_advice=None):
    """Turns the failures above into their one line and exit status;
    ``out`` is the output directory that a divergence leaves untouched,
    ``out_of_memory_advice`` and ``loader_advice`` what the out-of-memory
    and the dead loader's lines end with."""
    try:
        yield
    except BadEnvironment as e:  # before MPI starts: this worker says it
        _error(e)
        sys.exit(2)
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
    except MemoryError as e:
        _worker_failed(out_of_memory_text(e), out_of_memory_advice)
    except LoaderDiedError as e:
        _worker_failed(str(e), loader_advice)
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        _abort(1)


def _worker_failed(what, advice):
    """One line naming this worker (in a job of several), what failed and
    the advice; then the job ends with status 1."""
    if _world().size > 1:
        what = 'worker {}: {}'.format(_world().rank, what)
    _error('; '.join(filter(None, (what, advice))))
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


@contextlib.contextmanager
def training(out):
    """What the training loop raises, as the job's endings: an
    undecodable image as bad input, a full disk at a log or a plot as a
    snapshot's own :class:`run_directory.NoSpace`, any other refused write
    in ``out`` (read-only, permissions, an I/O error) as one line naming the
    file."""
    try:
        yield
    except UndecodableImageError as e:
        raise InputError(
            '{}; fix or remove it, or pass --skip-bad-images'.format(e))
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise run_directory.NoSpace(
                e.filename or out, run_directory.free_bytes(out),
                note='the snapshots written before it are intact') from None
        if not _inside(e.filename, out):
            raise
        raise InputError('{}: cannot be written ({}); the snapshots written '
                         'before it are intact'.format(
                             e.filename, e.strerror or e)) from None


def _inside(path, folder):
    """Whether ``path`` (a str, or None) lies in ``folder``."""
    if not isinstance(path, str):
        return False
    folder = os.path.abspath(folder)
    return os.path.commonpath([os.path.abspath(path), folder]) == folder
