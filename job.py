"""The job around a training run: preparing the process, claiming --out,
choosing the GPU, agreeing on input across the workers, naming flags in
errors, and how the job ends.

How a failure on one worker or on all of them ends the MPI job:

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
- Out of memory (NumPy's MemoryError, CuPy's ``OutOfMemoryError`` and the
  CPU engine's oneDNN out of memory, which are ones): each worker that ran
  out prints one line naming its rank, the allocation that failed and the
  caller's advice, and aborts the job with status 1. (The Linux OOM killer
  ends a process without a word: on CPUs only an allocation the kernel
  refuses at once gets here.)
- A loader process that died (:class:`errors.LoaderDiedError`: the OOM
  killer's, or a crash): its worker prints one line naming its rank and
  the caller's advice, and aborts the job with status 1.
- Anything else: the traceback, then an abort with status 1, so that no
  worker is left blocked in a collective.
- A worker frozen (SIGSTOP, a frozen node) or hung in one update: the stall
  watchdog (:func:`start_watchdog`, from just after the communicator is
  made to the worker's end; before it, the start's deadline,
  :func:`extensions.start_deadline`) ends the job with one line and
  status 5.
- A node lost (power, network): its workers vanish without a word, and the
  others wait in a collective until the launcher ends the job. Rank 0 prints
  :func:`node_ranks` at the start, so that the job scripts can name the lost
  node's ranks (jobs/mpi_quiet.sh).

A job of one process ends with its status instead of an abort, so that MPI
finalizes and removes its shared-memory files.
"""
import contextlib
import errno
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import multiprocessing.util
import os
import shutil
import socket
import sys
import tempfile
import traceback
import warnings
import weakref

import chainer

import communicators
import cuda_stack
from image_data.decoding import UndecodableImageError
from errors import DIVERGED_STATUS
from errors import STOPPED_STATUS
from errors import InputError
from errors import LoaderDiedError
from errors import NonFiniteGradientError
from errors import out_of_memory_text
from errors import ParameterError
from extensions import run_directory
from extensions import signal_stop
from extensions.stall_watchdog import StallWatchdog
import launchers
import processes


class JobInputError(InputError):
    """Bad input that every worker has raised together (see :func:`agree`).
    """


class Stopped(Exception):
    """Every worker stopped together on a signal, after a snapshot."""


def agree(comm, check, *args, **kwargs):
    """``check(*args, **kwargs)`` on every worker; if it raised
    :class:`InputError` on any, :class:`JobInputError` with the first message
    on all of them. Another exception is raised again where it was raised,
    after the others have learnt of it (and raise :class:`JobInputError`
    naming that worker), so that no worker waits for one that left."""
    result, failures = _gathered(comm.mpi_comm, check, *args, **kwargs)
    failures = [f for f in failures if f]
    if failures:
        raise JobInputError(failures[0])
    return result


def _gathered(mpi_comm, check, *args, **kwargs):
    """``(result, failures)``: ``check(*args, **kwargs)``'s result here and
    every worker's :class:`InputError` message (None where it passed), in
    rank order; another exception as :func:`agree` raises it."""
    result, failure, error = None, None, None
    try:
        result = check(*args, **kwargs)
    except InputError as e:
        failure = str(e)
    except Exception as e:
        error = e
        failure = 'worker {} failed ({}: {})'.format(
            mpi_comm.rank, type(e).__name__, e)
    failures = mpi_comm.allgather(failure)
    if error is not None:
        raise error
    return result, failures


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
    return communicators.start_mpi().COMM_WORLD  # after the loaders' start


def one_line_warning(message, category, filename, lineno, line=None):
    """``PROG: warning: message``: a warning reads as the errors do."""
    return '{}: warning: {}\n'.format(os.path.basename(sys.argv[0]), message)


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


def prepare_process(loaders):
    """Ready this process before MPI starts; its warnings are one line
    (:func:`one_line_warning`). Without a launcher, Open MPI's
    shared-memory transport is off (its 16 MiB file would stay in /dev/shm,
    with no daemon to remove it). Temporary files go to the job's session
    folder. The resource tracker (it removes the shared-memory index of a
    worker that MPI_Abort ended, without a warning) and, with ``loaders``,
    the loaders' forkserver start now: forks of a process that has started
    MPI crash on InfiniBand; both ignore the stop signals."""
    if not launchers.launched():
        os.environ.setdefault('OMPI_MCA_btl', 'self')
    sys.warnoptions.append('ignore:resource_tracker:UserWarning')
    warnings.formatwarning = one_line_warning
    use_the_jobs_session_directory()
    with signal_stop.ignoring():
        multiprocessing.resource_tracker.ensure_running()
        if loaders:
            multiprocessing.set_start_method('forkserver', force=True)
            multiprocessing.forkserver.ensure_running()


@contextlib.contextmanager
def naming(flag=None):
    """Errors about a value the job was given name the flag that gave it,
    the same way everywhere:

    - :class:`ParameterError` names its own flag (``lr`` -> ``--lr must be
      finite, got nan``);
    - :class:`InputError`, whose message starts with the value (a path),
      gets the flag before it: ``--mean m.npy: no such file``;
    - another library ``ValueError``: ``FLAG: message``.

    The first and the last come from checks every worker makes alike, so
    they end the job as :class:`JobInputError`, as does an error that every
    worker already raised together."""
    try:
        yield
    except ParameterError as e:
        raise JobInputError('--{} must be {}, got {}'.format(
            e.name.replace('_', '-'), e.expected, e.value)) from None
    except InputError as e:
        together = isinstance(e, JobInputError)
        raise (JobInputError if together else InputError)(
            '{} {}'.format(flag, e) if flag else str(e)) from None
    except ValueError as e:
        raise JobInputError('{}: {}'.format(flag, e) if flag else str(e)) \
            from None


#: The lock files of the output directories this process claimed: a lock
#: lasts while its file is open, until the process ends.
_locks = []


def claim_output(out, resume):
    """Lock ``out`` (``--out``) for this job and refuse it if it holds a run
    that this one (``resume``) does not continue."""
    with naming('--out'):
        try:
            _locks.append(run_directory.claim(out))
            run_directory.check_not_another_run(out, resume)
        except run_directory.DirectoryInUse as e:
            raise InputError('{}; wait for it to end or choose another --out'
                             .format(e))
        except run_directory.HoldsAnotherRun as e:
            raise InputError('{}; continue it with --resume auto, or choose '
                             'another --out'.format(e))
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise run_directory.NoSpace(out, run_directory.free_bytes(out))
            raise InputError('{}: not writable ({})'.format(
                out, e.strerror or e))


def check_free_space(out, model):
    """Refuse ``out`` unless one snapshot and the trained model fit: per
    element the parameter, up to two float32 optimizer buffers (RMSprop
    warm-up's), a float32 master of a float16 parameter (mixed16), then the
    parameter again in float32 (model.npz): 16 bytes, 18 under mixed16."""
    needed = sum(param.array.nbytes + 4 * param.size * (
        4 if param.dtype.itemsize == 2 else 3) for param in model.params())
    with naming('--out'):
        run_directory.check_free_space(out, needed)


def create_communicator(name, allreduce_dtype, allow_no_cudnn, gpu_flag=None,
                        dtype='float32', requested_gpu=None):
    """ChainerMN's communicator ``name`` (None: ``pure_nccl`` on GPUs,
    ``naive`` on CPUs; ``allreduce_dtype`` float16 makes them
    ``pure_nccl_fp16`` and ``mpi_fp16``) for gradients of ``dtype``; on
    GPUs, which the flag ``gpu_flag`` asked for (``requested_gpu``: the N
    of ``--device @cupy:N``), the CUDA stack is checked first."""
    name = name or ('pure_nccl' if gpu_flag else 'naive')
    if gpu_flag:
        check_gpu_stack(_world(), gpu_flag, allow_no_cudnn,
                        name in communicators.NCCL_NAMES, requested_gpu)
    with naming('--communicator {} --allreduce-dtype {}'.format(
            name, allreduce_dtype)):
        return communicators.create_communicator(
            name, allreduce_dtype, gpu=bool(gpu_flag), dtype=dtype)


def start_watchdog(comm, timeout):
    """This worker's stall watchdog (:mod:`extensions.stall_watchdog`),
    watching from now on; None for a job of one process or a ``timeout``
    of 0. Its thread calls MPI beside the training's: an MPI started below
    ``MPI_THREAD_MULTIPLE`` (the same library on every worker) ends the job
    as bad input every worker found."""
    if comm.size == 1 or timeout <= 0:
        return None
    try:
        communicators.check_thread_level(communicators.start_mpi(),
                                         'the stall watchdog')
    except InputError as e:
        raise JobInputError('--stall-timeout {:g}: {}, or pass '
                            '--stall-timeout 0 to train without the '
                            'watchdog'.format(timeout, e)) from None
    watchdog = StallWatchdog(comm.mpi_comm, comm.mpi_comm.allgather(
        socket.gethostname()), timeout)
    watchdog.start()
    return watchdog


def check_gpu_stack(mpi_comm, flag, allow_no_cudnn, need_nccl,
                    requested=None):
    """:func:`cuda_stack.check` on every worker of ``mpi_comm``, on the GPU
    each would train on, agreed: a stack that fails on one worker only (a
    node with a broken driver, a GPU held by a stale process) ends the job
    on every worker at once, as bad input does, with one line naming
    ``flag``, the worker, its node and GPU, and the cause. The others would
    otherwise wait in ChainerMN's start-up until the start's deadline."""
    hosts = mpi_comm.allgather(socket.gethostname())
    rank, size = mpi_comm.rank, mpi_comm.size
    intra_rank = hosts[:rank].count(hosts[rank])

    def check():
        try:
            cuda_stack.check(allow_no_cudnn, need_nccl, intra_rank, requested)
        except InputError as e:
            cause = str(e)
            if isinstance(e, cuda_stack.CudnnOffError):
                cause += ', or pass --allow-no-cudnn to train without it'
            if size > 1:
                cause = 'worker {} on {}, GPU {} (CUDA_VISIBLE_DEVICES={}): ' \
                    '{}'.format(rank, hosts[rank], intra_rank if requested
                                is None else requested, os.environ.get(
                                    'CUDA_VISIBLE_DEVICES', 'unset'), cause)
            raise InputError(cause) from None

    failures = _gathered(mpi_comm, check)[1]
    failed = [r for r, failure in enumerate(failures) if failure]
    if failed:
        raise JobInputError('{}: {}{}'.format(
            flag, failures[failed[0]], '; workers {} failed it too'.format(
                _ranges(failed[1:])) if len(failed) > 1 else ''))


def requested_gpu(device):
    """The N of ``--device @cupy:N``, else None."""
    return int(device.split(':')[1]) if device.startswith('@cupy') else None


def create_device(comm, device, gpu, cudnn_autotune, cudnn_workspace):
    """The worker's Chainer device: ``device`` (``-1``, ``@numpy`` or
    ``@cupy:N``), or with ``gpu`` the GPU of the worker's intra-node rank;
    on a GPU, cuDNN configured and the stack line printed by rank 0."""
    if not (gpu or device.startswith('@cupy')):
        return chainer.get_device(device)
    chosen = chainer.get_device('@cupy:{}'.format(choose_gpu(
        comm, '--gpu' if gpu else '--device ' + device,
        None if gpu else requested_gpu(device))))
    chosen.use()
    cuda_stack.configure_cudnn(cudnn_autotune, cudnn_workspace)
    if comm.rank == 0:
        print(cuda_stack.stack_line(chosen.device.id))
    return chosen


def choose_gpu(comm, flag, requested=None):
    """The id of the GPU this worker trains on (``requested``, or by its
    intra-node rank: :func:`cuda_stack.device_for`), refused in one line
    naming ``flag`` when it is not visible or two ranks would share it."""
    with naming(flag):
        device_id = agree(comm, cuda_stack.device_for, comm.intra_rank,
                          cuda_stack.visible_gpus(), requested)
        agree(comm, cuda_stack.check_not_shared,
              comm.mpi_comm.allgather(cuda_stack.placement(device_id)))
    return device_id


@contextlib.contextmanager
def training(out):
    """What the training loop raises, as the job's endings: an
    undecodable image as bad input, a full disk at a log or a plot as a
    snapshot's own :class:`run_directory.NoSpace`."""
    try:
        yield
    except UndecodableImageError as e:
        raise InputError(
            '{}; fix or remove it, or pass --skip-bad-images'.format(e))
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise run_directory.NoSpace(
            e.filename or out, run_directory.free_bytes(out),
            note='the snapshots written before it are intact') from None


def check_stopped(stop, trainer, out, snapshot_name):
    """:class:`Stopped` when a stop signal, not the training length, ended
    the run (``stop``: its :class:`signal_stop.SignalStop`)."""
    if stop.signal_number and not trainer.stop_trigger.reached:
        raise Stopped(
            'stopped by {} after iteration {}; its snapshot is {}; continue '
            'with --resume auto'.format(
                stop.signal_name, stop.iteration, os.path.join(
                    out, snapshot_name.format(stop.iteration))))
