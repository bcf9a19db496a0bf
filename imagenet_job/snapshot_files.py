"""Snapshot file names: ``snapshot_iter_N``, and their order.

The trainer writes them, ``--resume auto`` takes the newest, the closing
line and a refused ``--out`` name it, and the study driver parks it: one
rule for all of them.
"""
import os
import re
import stat

#: The trainer's snapshot file name, formatted with the trainer.
PATTERN = 'snapshot_iter_{.updater.iteration}'
#: The name of the snapshot of an iteration: ``NAME.format(i)``.
NAME = 'snapshot_iter_{}'
#: A glob of the names (and of some that are not: check with
#: :func:`iteration_of`).
GLOB = 'snapshot_iter_*'
_NAME = re.compile(r'^snapshot_iter_(\d+)$')


def iteration_of(name):
    """The iteration of snapshot file ``name``, None for another name."""
    match = _NAME.match(name)
    return int(match.group(1)) if match else None


def is_regular(path):
    """Whether ``path`` is a regular file itself: not a link, FIFO, device
    or folder (which ``--resume auto`` never opens)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def in_order(names):
    """The snapshot names among ``names``, oldest first."""
    return sorted((name for name in names if iteration_of(name) is not None),
                  key=iteration_of)
