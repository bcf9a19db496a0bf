"""How the project writes a file: never over one it did not write.

Every entry point writes its outputs here. A file is written whole to a
temporary ``.NAME.tmpPID`` beside its name, created exclusively and never
through a link, flushed to disk and renamed over the name
(:func:`write_replacing`, :func:`open_replacing`, :func:`replacing`), so
that a kill leaves the old file or the new one; a probe or record is
created exclusively (:func:`create_exclusive`). What lies at an output's
name is refused (:func:`refuse_existing`) unless the caller says it may be
replaced (a ``--force`` flag, or a directory of this project's own run),
and never where it is an input or not a regular file. The job scripts
follow the same rules in shell (jobs/lib.sh: ``check_out_dir``,
``write_job_file`` with ``noclobber``, ``owned_file``).
"""
import contextlib
import os
import random
import re
import stat

from largebatch.errors import InputError

#: The name of a temporary file of :func:`replacing` (with the suffix a
#: writer may need, such as ``.png``): a killed writer leaves it behind.
TEMPORARY = re.compile(r'^\..+\.tmp\d+(\.png)?$')


class OutputError(InputError):
    """An output that must not be written. ``replaceable``: a flag that
    allows replacing (``--force``) would let it be written."""

    def __init__(self, message, replaceable=False):
        self.replaceable = replaceable
        super(OutputError, self).__init__(message)


def _kind(mode):
    for test, name in ((stat.S_ISDIR, 'a folder'), (stat.S_ISFIFO, 'a FIFO'),
                       (stat.S_ISCHR, 'a device'), (stat.S_ISBLK, 'a device'),
                       (stat.S_ISSOCK, 'a socket')):
        if test(mode):
            return name
    return 'no regular file'


def refuse_existing(path, force=False, inputs=()):
    """Raise :class:`OutputError` unless ``path`` may be written: its
    folder exists, and nothing lies at it, or (with ``force``) a regular
    file or a link (the link is replaced, not what it points to) that is
    none of ``inputs`` (compared by device and inode, so a hard link or
    another path to an input is caught)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OutputError('{}: its folder {} does not exist'.format(
            path, folder))
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    same = [found]
    if stat.S_ISLNK(found.st_mode):
        with contextlib.suppress(OSError):
            same.append(os.stat(path))
    for name in inputs:
        with contextlib.suppress(OSError):
            given = os.stat(name)
            if any((s.st_dev, s.st_ino) == (given.st_dev, given.st_ino)
                   for s in same):
                raise OutputError('{} is the input {}; write the output '
                                  'elsewhere'.format(path, name))
    if not (stat.S_ISREG(found.st_mode) or stat.S_ISLNK(found.st_mode)):
        raise OutputError('{} is {}; it is never replaced'.format(
            path, _kind(found.st_mode)))
    if not force:
        raise OutputError('{} exists already'.format(path), replaceable=True)


def create_exclusive(path, mode=0o666):
    """Create ``path`` and return its descriptor, open for writing: never
    over anything, never through a link (``FileExistsError`` there)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                   os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def create_temporary(path, suffix=''):
    """Create an empty temporary file beside ``path``, ``.NAME.tmpPID`` +
    ``suffix`` (other digits after the PID where a killed writer left that
    name), and return its path."""
    folder, name = os.path.split(os.path.abspath(path))
    tail = ''
    while True:
        tmp = os.path.join(folder, '.{}.tmp{}{}{}'.format(
            name, os.getpid(), tail, suffix))
        try:
            os.close(create_exclusive(tmp))
            return tmp
        except FileExistsError:  # a killed writer's, of an earlier PID
            tail = '{:06d}'.format(random.randrange(10 ** 6))


def _sync_folder(folder):
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rename_over(tmp, path, force, inputs):
    """Flush the written temporary ``tmp`` to disk and rename it over
    ``path``, checked again: nothing new lies there meanwhile."""
    if not stat.S_ISREG(os.lstat(tmp).st_mode):
        raise OutputError('{} was replaced while it was written'.format(tmp))
    fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    refuse_existing(path, force, inputs)
    os.replace(tmp, path)
    _sync_folder(os.path.dirname(os.path.abspath(path)))


@contextlib.contextmanager
def replacing(path, force=False, inputs=(), suffix=''):
    """Yield the path of a new empty temporary file beside ``path`` (named
    ``.NAME.tmpPID`` + ``suffix``, for writers that go by the extension),
    for a writer that takes a file name; when the block ends, rename it over
    ``path`` after :func:`refuse_existing` (``force``, ``inputs``). A
    temporary left empty means nothing was written: ``path`` stays as it
    is. The temporary never outlives the block."""
    refuse_existing(path, force, inputs)
    tmp = create_temporary(path, suffix)
    try:
        yield tmp
        if os.lstat(tmp).st_size:
            _rename_over(tmp, path, force, inputs)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


@contextlib.contextmanager
def open_replacing(path, force=False, inputs=(), text=False):
    """Yield the temporary file of :func:`replacing`, open for writing
    (binary, or ``text``); it is renamed over ``path`` when the block ends
    without an error, whatever it holds."""
    refuse_existing(path, force, inputs)
    tmp = create_temporary(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, 'w' if text else 'wb') as f:
            yield f
        _rename_over(tmp, path, force, inputs)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def write_replacing(path, write, force=False, inputs=(), text=False):
    """Write ``path`` whole: ``write(f)`` writes into the open temporary
    file of :func:`open_replacing`."""
    with open_replacing(path, force, inputs, text) as f:
        write(f)
