"""What a file a user names must be before it is read: a regular file.

A FIFO would block its open (or its read) for ever, a device never ends, a
folder is no file: each is one line naming the path and what it is, before
anything opens it.
"""
import os
import stat

from largebatch.errors import InputError

_KINDS = ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO, 'a FIFO'),
          (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISSOCK, 'a socket'))


def check_regular(path, what=None):
    """Raise :class:`InputError` (``[what ]path: ...``) unless ``path`` is a
    regular file, or a link to one."""
    label = path if what is None else '{} {}'.format(what, path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError('{}: no such file'.format(label)) from None
    except OSError as e:
        raise InputError('{}: cannot be read ({})'.format(
            label, e.strerror)) from None
    if not stat.S_ISREG(mode):
        kind = next(name for test, name in _KINDS if test(mode))
        raise InputError('{}: {}, not a regular file'.format(label, kind))
