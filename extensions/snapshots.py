"""Atomic snapshots, finding the newest intact one, and resume checks.

A snapshot is written to a temporary file beside its final name, flushed to
disk and renamed over it, so a kill at any moment leaves either the previous
snapshots or the new complete one, never a torn file under a snapshot name.
"""
import errno
import glob
import os
import re
import warnings
import zipfile

import chainer
from chainer.serializers import npz
from chainer.training import extension
from chainer.training.extensions import snapshot_writers
import numpy

from errors import InputError
from extensions import run_directory

SNAPSHOT_PATTERN = 'snapshot_iter_{.updater.iteration}'
#: The name of the snapshot of an iteration: ``SNAPSHOT_NAME.format(i)``.
SNAPSHOT_NAME = 'snapshot_iter_{}'
#: The trained network of a finished run, as a plain Chainer model
#: (:func:`models.plain_copy`).
MODEL_NAME = 'model.npz'
_SNAPSHOT_NAME = re.compile(r'^snapshot_iter_(\d+)$')


class AtomicWriter(snapshot_writers.Writer):
    """Writes ``outdir/filename`` via a temporary file, fsync and rename."""

    def __call__(self, filename, outdir, target):
        path = os.path.join(outdir, filename)
        tmp = os.path.join(outdir, '.{}.tmp{}'.format(filename, os.getpid()))
        try:
            with open(tmp, 'wb') as f:
                # Uncompressed: 20x faster for ResNet-50, 8% larger.
                npz.save_npz(f, target, compression=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            _remove(tmp)
            raise run_directory.NoSpace(
                path, run_directory.free_bytes(outdir),
                note='the snapshots written before it are intact') from None
        finally:
            _remove(tmp)
        directory = os.open(outdir, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self._post_save()


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def snapshot(keep):
    """The trainer snapshot extension, keeping the newest ``keep`` files."""
    return chainer.training.extensions.snapshot(
        filename=SNAPSHOT_PATTERN, writer=AtomicWriter(), n_retains=keep)


def is_intact(path):
    """Whether ``path`` is a complete, readable ``.npz`` archive."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


def latest_snapshot(outdir):
    """The newest intact snapshot in ``outdir`` (None if there is none),
    warning about each damaged one that is skipped."""
    found = []
    for path in glob.glob(os.path.join(outdir, 'snapshot_iter_*')):
        match = _SNAPSHOT_NAME.match(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    for _, path in sorted(found, reverse=True):
        if is_intact(path):
            return path
        warnings.warn('skipping damaged snapshot {}'.format(path))
    return None


def find_resume(resume, outdir, config, name='run_configuration'):
    """The snapshot to resume from, or None to start afresh.

    ``resume`` is a snapshot's path, ``'auto'`` for the newest intact one in
    ``outdir`` (None if there is none yet), or None. The snapshot must match
    ``config``, the :class:`RunConfiguration` registered under ``name``.
    Raises :class:`InputError` whose message starts with the snapshot's path.
    """
    if resume is None:
        return None
    if resume == 'auto':
        path = latest_snapshot(outdir)
        if path is None:
            return None
    else:
        path = resume
        if os.path.isdir(path):
            raise InputError('{}: a directory, expected a snapshot file '
                             '(or auto)'.format(path))
        if not os.path.isfile(path):
            raise InputError('{}: no such file'.format(path))
        if not is_intact(path):
            raise InputError(
                '{}: damaged or incomplete snapshot'.format(path))
    config.check(path, name)
    return path


def load(path, trainer):
    """Load snapshot ``path`` into ``trainer``. A snapshot that lacks a value
    the trainer holds (one written by an older trainer whose optimizer kept
    other state, for instance) raises :class:`InputError` naming the value.
    """
    try:
        npz.load_npz(path, trainer)
    except KeyError as e:
        missing = str(e.args[0]).split(' is not a file in the archive')[0]
        raise InputError(
            '{}: the snapshot holds no {}; it was written by another version '
            'of this trainer; start in a new output directory'.format(
                path, missing))


class RunConfiguration(extension.Extension):
    """Stores in every snapshot what a resumed run must share with it.

    ``check(path)`` refuses, with one line naming the difference, a snapshot
    taken with another architecture, class count, number of workers,
    per-worker batch or accumulation (the data order and the schedules depend
    on them), or another recipe or optimizer (the optimizer's state differs).
    Snapshots older than the keys in :attr:`LATER_KEYS` lack them and are
    checked on the others.
    """

    trigger = None
    priority = extension.PRIORITY_READER
    #: Keys that snapshots written before them do not hold.
    LATER_KEYS = ('recipe', 'optimizer', 'momentum_correction', 'lars')

    def __init__(self, **config):
        self.config = config

    def __call__(self, trainer):
        pass

    def serialize(self, serializer):
        for key, value in sorted(self.config.items()):
            try:
                self.config[key] = type(value)(serializer(key, value))
            except KeyError:
                if key not in self.LATER_KEYS:
                    raise

    def check(self, path, name):
        """Raise :class:`InputError` unless snapshot ``path`` matches."""
        prefix = 'extensions/{}/'.format(name)
        try:
            with numpy.load(path) as archive:
                stored = {key: archive[prefix + key].item()
                          for key in self.config if prefix + key in archive}
        except (ValueError, OSError, zipfile.BadZipFile) as e:
            raise InputError('{}: not a readable snapshot ({})'
                             .format(path, e))
        if set(self.config) - set(stored) - set(self.LATER_KEYS):
            raise InputError('{}: not a snapshot of this trainer'
                             .format(path))
        for key in (key for key in self.config if key in stored):
            if stored[key] != self.config[key]:
                raise InputError(
                    '{}: the snapshot was taken with {} = {}, this run has '
                    '{}; resume with the same setting or start in a new '
                    'output directory'.format(path, key, stored[key],
                                              self.config[key]))
