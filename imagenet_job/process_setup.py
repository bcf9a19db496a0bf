"""Readying a worker's process before MPI starts: its warnings, its
temporary files, and the helper processes that must be forked first."""
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import multiprocessing.util
import os
import shutil
import sys
import tempfile
import warnings

from imagenet_job import environment
from imagenet_job import signal_stop
from largebatch import console
from largebatch import launchers
from largebatch import processes

#: Temporary folders of processes whose session folder is unusable start with
#: this and the process's id.
PRIVATE_TEMP_PREFIX = 'train_imagenet-'


def prepare_process(loaders):
    """Ready this process before MPI starts; its warnings are one line
    (:func:`one_line_warning`), and standard output prints any path
    (:func:`console.print_any_text`). Without a launcher, Open MPI's
    shared-memory transport is off (its 16 MiB file would stay in /dev/shm,
    with no daemon to remove it). Temporary files go to the job's session
    folder. The environment is checked
    (:func:`environment.check_environment`). The resource tracker (it
    removes the shared-memory index of a worker that MPI_Abort ended,
    without a warning) and, with ``loaders``,
    the loaders' forkserver start now: forks of a process that has started
    MPI crash on InfiniBand; both ignore the stop signals."""
    launched = launchers.launched()
    if not launched:
        os.environ.setdefault('OMPI_MCA_btl', 'self')
    console.print_any_text()
    sys.warnoptions.append('ignore:resource_tracker:UserWarning')
    warnings.formatwarning = one_line_warning
    use_the_jobs_session_directory()
    environment.check_environment(launched)
    with signal_stop.ignoring():
        multiprocessing.resource_tracker.ensure_running()
        if loaders:
            multiprocessing.set_start_method('forkserver', force=True)
            multiprocessing.forkserver.ensure_running()


def one_line_warning(message, category, filename, lineno, line=None):
    """``PROG: warning: message``: a warning reads as the errors do."""
    return '{}: warning: {}\n'.format(os.path.basename(sys.argv[0]), message)


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
