"""The output directory of one run: its lock, its owner and its free space.

A run's directory holds its ``log``, ``model.npz`` and ``snapshot_iter_*``
files. A new run must not write there: the snapshot extension prunes the
oldest snapshots and the log and model are rewritten, so another run's
results would be lost; nor may it write among a user's files. Three rules
keep them:

- :func:`check_owned` lets :func:`claim` write only in a directory that is
  new, empty or a run of this project (it holds a record of one), and
  remove a killed writer's temporary files only in a run.
- :func:`claim` takes an exclusive ``flock`` on ``<dir>/.lock`` for the life
  of the process. The kernel releases it when the process ends, however it
  ends (SIGKILL and a lost node included), so a stale lock never blocks a
  restart; a second job that finds it held stops before writing anything.
- :func:`check_not_another_run` refuses a directory that holds a run unless
  this run continues it.
"""
import errno
import fcntl
import glob
import os
import socket
import stat
import time

from imagenet_job import snapshot_files
from largebatch import outputs
from largebatch.errors import InputError

LOCK_NAME = '.lock'
#: The trained network of a finished run, as a plain Chainer model
#: (:func:`models.saved_model.trained`).
MODEL_NAME = 'model.npz'
#: Files whose presence means the directory holds a run: its log, its
#: finished network (which a new run would replace, also when it starts
#: from it with --initmodel) and snapshots.
RUN_FILES = ('log', MODEL_NAME, snapshot_files.GLOB)
#: The records whose presence makes a directory a run of this project: the
#: trainer's history of starts (:mod:`imagenet_job.run_record`) and the job
#: scripts' (jobs/lib.sh), each a regular file of this user.
RECORDS = ('args.json', 'job.record')
#: What the job scripts write into a new run's directory before the trainer
#: starts (jobs/common.sh): no content of another's.
JOB_FILES = ('job.record', 'launch.sh', 'job.log', 'hostfile')


class DirectoryInUse(InputError):
    """Another live process holds the directory's lock."""


class HoldsAnotherRun(InputError):
    """The directory holds a run that this one does not continue.

    Attributes:
        found (list of str): the run's files that were found.
    """

    def __init__(self, directory, found):
        self.found = found
        super(HoldsAnotherRun, self).__init__(
            '{} holds another run ({})'.format(directory, ', '.join(found)))


class NotARun(InputError):
    """The directory holds files that no run of this project wrote.

    Attributes:
        foreign (list of str): their names.
    """

    def __init__(self, directory, foreign):
        self.foreign = foreign
        super(NotARun, self).__init__(
            '{} holds files this trainer did not write ({}{}); choose a new '
            'or empty --out'.format(directory, ', '.join(foreign[:3]),
                                    ', ...' if len(foreign) > 3 else ''))


class LaterSnapshots(InputError):
    """A resume from a snapshot of the directory's run that has later ones:
    the resumed run's pruning would delete the older snapshots first, its
    own start among them, and ``--resume auto`` would take up the later."""

    def __init__(self, directory, resume, later):
        super(LaterSnapshots, self).__init__(
            '{} holds later snapshots of the run ({}); resume from it into '
            'another --out (--out NEW --resume {}), or move them away'.format(
                directory, ', '.join(later), resume))


class FileInTheWay(InputError):
    """The directory, or a folder on its path, is a file; or ``what`` is in
    the way (its lock file is a link or not a regular file)."""

    def __init__(self, directory, what=None):
        if what is not None:
            super(FileInTheWay, self).__init__(what)
            return
        blocker = directory
        while blocker and not os.path.exists(blocker):
            blocker = os.path.dirname(blocker)
        if blocker in (directory, ''):
            blocker = 'it'
        super(FileInTheWay, self).__init__(
            '{}: {} is a file, not a directory'.format(directory, blocker))


class NoSpace(InputError):
    """Too little free space for a file. ``free`` is in bytes."""

    def __init__(self, path, free, needed=None, note=None):
        self.path, self.free, self.needed = path, free, needed
        super(NoSpace, self).__init__('{}: no space left on its file system '
                                      '({} free{}){}'.format(
                                          path, format_bytes(free),
                                          '' if needed is None else
                                          ', {} needed'.format(
                                              format_bytes(needed)),
                                          '; ' + note if note else ''))


def format_bytes(n):
    for unit in ('bytes', 'KiB', 'MiB', 'GiB'):
        if n < 1024 or unit == 'GiB':
            return ('{:.0f} {}' if unit == 'bytes' else '{:.1f} {}').format(
                n, unit)
        n /= 1024.


def free_bytes(path):
    """Bytes that an unprivileged process may still write at ``path`` (or,
    if it does not exist yet, in the nearest folder above it that does)."""
    path = os.path.abspath(path)
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def claim(directory):
    """Create ``directory`` if needed and lock it for this process, where
    :func:`check_owned` allows it (nothing is written before).

    Returns the open lock file: the lock lasts while it stays open (keep a
    reference) and ends with the process. Raises :class:`DirectoryInUse`
    naming the holder (process id, host, start time) when another process
    holds it, :class:`FileInTheWay` when it or a folder on its path is a
    file, and ``OSError`` when the directory cannot be written.
    """
    is_run = check_owned(directory)
    try:
        os.makedirs(directory, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise FileInTheWay(directory)
    path = os.path.join(directory, LOCK_NAME)
    try:  # never through a link, never blocking on a FIFO
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW |
                     os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise FileInTheWay(directory, '{} is a symbolic link; remove it'
                           .format(path)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileInTheWay(directory, '{} is not a regular file; remove it'
                           .format(path))
    lock = os.fdopen(fd, 'r+')
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            lock.close()
            raise
        lock.seek(0)
        holder = lock.read().strip() or 'another process'
        lock.close()
        raise DirectoryInUse('{} is in use by a running job ({})'.format(
            directory, holder))
    lock.seek(0)
    lock.truncate()
    lock.write('process {} on {} since {}\n'.format(
        os.getpid(), socket.gethostname(),
        time.strftime('%Y-%m-%d %H:%M:%S')))
    lock.flush()
    try:
        if is_run:
            remove_leftovers(directory)
        refuse_links(directory)
    except FileInTheWay:
        lock.close()
        raise
    return lock


def is_leftover(name):
    """Whether ``name`` is a temporary file of a writer that was killed:
    outputs, and the free-space probe, are written as ``.NAME.tmpPID``
    (:func:`largebatch.outputs.create_temporary`)."""
    return bool(outputs.TEMPORARY.match(name))


def _is_record(path):
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid()


def check_owned(directory):
    """Raise :class:`NotARun` unless ``directory`` is new, empty (but for
    the lock, a killed writer's temporary files and what the job scripts
    write first, :data:`JOB_FILES`) or a run of this project: it holds one
    of :data:`RECORDS`. Return whether it is such a run."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        raise FileInTheWay(directory)
    if any(_is_record(os.path.join(directory, name)) for name in RECORDS):
        return True
    foreign = [name for name in names if name != LOCK_NAME and
               name not in JOB_FILES and not is_leftover(name)]
    if foreign:
        raise NotARun(directory, foreign)
    return False


def remove_leftovers(directory):
    """Remove the temporary files of killed writers (:func:`is_leftover`)
    in ``directory``, a run whose lock this process holds, so no writer of
    it is alive; folders aside: a link is removed, not what it points to."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if is_leftover(name) and not stat.S_ISDIR(os.lstat(path).st_mode):
            os.remove(path)


def refuse_links(directory):
    """Raise :class:`FileInTheWay` for the first symbolic link in
    ``directory``: the log, plots, model, records and TensorBoard folder
    would be written through it, outside the directory. Snapshot names are
    left to the snapshot reader, which skips what is not a regular file, and
    whose writer replaces the link itself."""
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.islink(path) and snapshot_files.iteration_of(name) is None:
            raise FileInTheWay(directory, '{} is a symbolic link; the '
                               'trainer writes through none in --out: '
                               'remove it'.format(path))


def check_folder(directory, name):
    """Raise :class:`FileInTheWay` where ``directory/name``, a folder the
    trainer writes in (``tensorboard``), exists and is no folder: found at
    the start, not when training writes there."""
    path = os.path.join(directory, name)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise FileInTheWay(directory, '{} is not a folder; the trainer '
                           'writes its {} files in it: move it away'.format(
                               path, name))


def run_files(directory):
    """The names of the files in ``directory`` that belong to a run."""
    found = []
    for pattern in RUN_FILES:
        found += sorted(os.path.basename(path) for path in
                        glob.glob(os.path.join(directory, pattern)))
    return found


def check_not_another_run(directory, resume):
    """Raise :class:`HoldsAnotherRun` if ``directory`` holds a run and
    ``resume`` (a snapshot path, ``'auto'`` or None) does not continue it.

    ``'auto'`` continues the run in ``directory``, and so does a snapshot
    that lies in it, unless later snapshots lie there too
    (:class:`LaterSnapshots`); starting afresh, or from a snapshot
    elsewhere, would prune its snapshots and overwrite its log.
    """
    found = run_files(directory)
    if not found or resume == 'auto':
        return
    if resume is not None and os.path.realpath(os.path.dirname(
            os.path.abspath(resume))) == os.path.realpath(directory):
        start = snapshot_files.iteration_of(os.path.basename(resume))
        later = [name for name in snapshot_files.in_order(found)
                 if start is not None and
                 snapshot_files.iteration_of(name) > start]
        if later:  # pruning and --resume auto would take them for its own
            raise LaterSnapshots(directory, resume, later)
        return
    newest = snapshot_files.in_order(found)[-1:]
    raise HoldsAnotherRun(directory, newest + [
        f for f in found if not f.startswith('snapshot_iter_')])


def check_free_space(directory, needed):
    """Raise :class:`NoSpace` unless ``needed`` bytes fit in ``directory``,
    and unless a first block can actually be written there (a file system
    that reports space but has no inode or quota left fails here)."""
    free = free_bytes(directory)
    if free < needed:
        raise NoSpace(directory, free, needed)
    try:
        probe = outputs.create_temporary(os.path.join(directory, 'space'))
        with os.fdopen(os.open(probe, os.O_WRONLY | os.O_NOFOLLOW),
                       'wb') as f:
            try:
                f.write(b'\0' * 65536)
                f.flush()
                os.fsync(f.fileno())
            finally:
                os.remove(probe)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpace(directory, free_bytes(directory), needed)
        raise
