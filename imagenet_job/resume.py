"""The snapshot a run resumes from: found, verified and loaded from one
reading of its file.

Each worker reads the snapshot's file once: :meth:`Snapshot.read` checks
every member's .npy header against the bytes its zip entry holds, then
reads every member through (zipfile checks each one's CRC), so that a torn
or damaged file is skipped or refused before the run starts; the run
configuration it records and, once the trainer is built, the trainer's
state come from those bytes, each value's header checked against what the
trainer holds before its payload is read. The file's bytes stay in memory
until the load (280 MB for ResNet-50 with RMSprop warm-up's state); a
member is decompressed only when it is loaded.
"""
import io
import os
import stat
import warnings
import zipfile
import zlib

from chainer.serializers import npz
import numpy

from imagenet_job import snapshot_files
from largebatch import npz_members
from largebatch.errors import InputError

#: The run configuration's counts, which the split of the total reads.
COUNT_KEYS = ('workers', 'accumulate', 'batchsize', 'n_class')


class Snapshot(object):
    """A snapshot file read once, its members' headers checked
    (:class:`largebatch.npz_members.NpzFile`) and their CRCs verified; its
    arrays by name, as NumPy's ``NpzFile`` gives them, never unpickled.

    Attributes:
        path (str): the file.
    """

    def __init__(self, path, archive):
        self.path = path
        self._archive = archive

    @classmethod
    def read(cls, path):
        """The snapshot at ``path``; None where it is damaged or torn.
        :class:`InputError` for a member whose header does not describe
        the bytes it holds."""
        data = None
        try:
            with open(path, 'rb') as f:
                data = f.read()
            archive = npz_members.NpzFile(path, io.BytesIO(data))
            archive.verify()
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error):
            return None
        except InputError:
            if npz_members.fails_its_crc(data):  # a flipped bit in a header
                return None
            raise
        return cls(path, archive)

    def __contains__(self, name):
        return name in self._archive

    def __getitem__(self, name):
        """The array ``name``, read from the file's bytes."""
        return self._archive[name]

    def header(self, name):
        """The .npy header of ``name``, read before its payload."""
        return self._archive.header(name)

    @property
    def files(self):
        return self._archive.files

    def configuration(self, name='run_configuration'):
        """The :class:`~imagenet_job.snapshots.RunConfiguration` values
        (registered as ``name``) that the snapshot holds, as a dict."""
        prefix = 'extensions/{}/'.format(name)
        try:
            stored = {key[len(prefix):]: self[key].item()
                      for key in self.files if key.startswith(prefix)}
        except ValueError as e:
            raise InputError('{}: not a readable snapshot ({})'.format(
                self.path, e))
        for key in COUNT_KEYS:
            value = stored.get(key, 1)
            if isinstance(value, bool) or not isinstance(value, int) or \
                    value < 1:
                raise InputError(
                    '{}: its {} is {!r}, expected a positive count; the '
                    'snapshot is not one this trainer wrote'.format(
                        self.path, key, value))
        return stored

    def load_into(self, trainer):
        """Load the snapshot into ``trainer`` as data
        (:class:`DataDeserializer`). A snapshot that lacks a value the
        trainer holds, holds objects or values of another shape or kind
        raises :class:`InputError` naming the file and the value; nothing is
        changed on disk."""
        try:
            trainer.serialize(DataDeserializer(self, self.path))
        except KeyError as e:
            raise InputError(
                '{}: the snapshot holds no {}; it was written by another '
                'version of this trainer; start in a new output directory'
                .format(self.path, e.args[0])) from None
        except InputError:  # a ValueError that names its value already
            raise
        except (ValueError, TypeError, OSError) as e:
            # an extension's own reading of its value (LogReport's JSON)
            raise InputError('{}: the snapshot holds a value this trainer '
                             'cannot read ({}: {})'.format(
                                 self.path, type(e).__name__,
                                 str(e).splitlines()[0] if str(e) else ''
                             )) from None


def latest_snapshot(outdir):
    """The newest intact snapshot in ``outdir``, read (None if there is
    none), warning about each damaged one, and each that is not a regular
    file, that is skipped."""
    names = snapshot_files.in_order(os.listdir(outdir)) \
        if os.path.isdir(outdir) else []
    for path in (os.path.join(outdir, name) for name in reversed(names)):
        if not snapshot_files.is_regular(path):
            warnings.warn('skipping {}: not a regular file'.format(path))
            continue
        snapshot = Snapshot.read(path)
        if snapshot is not None:
            return snapshot
        warnings.warn('skipping damaged snapshot {}'.format(path))
    return None


def resume_snapshot(resume, outdir):
    """The snapshot ``resume`` names, read (``'auto'``: the newest intact one
    in ``outdir``, or None where it holds none; InputError where it holds
    snapshots and none is intact)."""
    if resume is None:
        return None
    if resume == 'auto':
        snapshot = latest_snapshot(outdir)
        damaged = [] if snapshot is not None else [
            name for name in snapshot_files.in_order(
                os.listdir(outdir) if os.path.isdir(outdir) else [])
            if snapshot_files.is_regular(os.path.join(outdir, name))]
        if damaged:  # starting afresh would overwrite them
            raise InputError(
                '{}: every snapshot in it is damaged ({}); resume from one '
                'with --resume FILE, or move them away to start afresh'
                .format(outdir, ', '.join(damaged)))
        return snapshot
    if os.path.isdir(resume):
        raise InputError('{}: a directory, expected a snapshot file '
                         '(or auto)'.format(resume))
    if not os.path.lexists(resume):
        raise InputError('{}: no such file'.format(resume))
    if not stat.S_ISREG(os.stat(resume).st_mode):
        raise InputError('{}: not a regular file, expected a snapshot'
                         .format(resume))
    snapshot = Snapshot.read(resume)
    if snapshot is None:
        raise InputError('{}: damaged or incomplete snapshot'.format(resume))
    return snapshot


def find_resume(resume, outdir, config, name='run_configuration',
                snapshot=None):
    """The snapshot to resume from, read, or None to start afresh.

    ``resume`` is a snapshot's path, ``'auto'`` for the newest intact one in
    ``outdir`` (None if there is none yet), or None; ``snapshot``, where
    given, is the one it names, read already. The snapshot must match
    ``config``, the :class:`RunConfiguration` registered under ``name``.
    Raises :class:`InputError` whose message starts with the snapshot's path.
    """
    if snapshot is None:
        snapshot = resume_snapshot(resume, outdir)
    if snapshot is None:
        return None
    config.check(snapshot, name)
    return snapshot


def virtual_workers_per_worker(snapshot, workers):
    """``--accumulate auto``: the micro-batches per worker that keep the
    total of ``snapshot`` (its workers x micro-batches) on ``workers``
    workers; ``snapshot`` None (nothing to resume) is bad input."""
    if snapshot is None:
        raise InputError('no snapshot to resume from, so no total to keep; '
                         'give the micro-batches per worker')
    stored = snapshot.configuration()
    if not {'workers', 'accumulate'} <= set(stored):
        raise InputError('{}: not a snapshot of this trainer (it records no '
                         'workers and micro-batches)'.format(snapshot.path))
    total = stored['workers'] * stored['accumulate']
    if total % workers:
        raise InputError(
            '{}: its {} virtual workers ({} workers x {} micro-batches) do '
            'not divide among {} workers'.format(
                snapshot.path, total, stored['workers'],
                stored['accumulate'], workers))
    return total // workers


class DataDeserializer(npz.NpzDeserializer):
    """Chainer's ``NpzDeserializer`` over a snapshot read without pickle,
    each value checked against what the trainer holds before it is copied:
    an array of the same shape, a number for a number (counts not below
    zero), never an object. ``source`` (the file) names the errors, which
    are :class:`InputError`.

    Chainer's ``load_npz`` opens archives with ``allow_pickle=True``, so a
    snapshot could run code when it is read; here a snapshot is data.
    """

    def __init__(self, archive, source, path=''):
        super(DataDeserializer, self).__init__(archive, path, strict=True)
        self.source = source

    def __getitem__(self, key):
        return DataDeserializer(self.npz, self.source,
                                self.path + key.strip('/') + '/')

    def __call__(self, key, value):
        name = self.path + key.lstrip('/')
        if name not in self.npz:  # a KeyError, as Chainer's: callers that
            raise KeyError(name)  # know older snapshots catch it
        _check_value(self.source, name, self.npz.header(name), value)
        data = self.npz[name]
        if isinstance(value, (bool, int, float)):
            _check_number(self.source, name, data.item(), value)
        if value is None:
            return data
        if isinstance(value, numpy.ndarray):
            numpy.copyto(value, data)
            return value
        if hasattr(value, 'set'):  # a CuPy array
            value.set(numpy.asarray(data, dtype=value.dtype))
            return value
        return type(value)(data)


def _check_value(source, name, header, value):
    """:class:`InputError` unless the array that ``header`` describes (read
    before its payload) can take the place of the trainer's ``value``."""
    def refuse(what):
        raise InputError('{}: {} {}; the snapshot is not one this trainer '
                         'wrote'.format(source, name, what))
    if value is None:
        return
    if hasattr(value, 'shape') and hasattr(value, 'dtype'):
        if header.shape != value.shape:
            refuse('has shape {}, the trainer holds {}'.format(
                header.shape, value.shape))
        if header.dtype.kind != value.dtype.kind and not (
                header.dtype.kind in 'biu' and value.dtype.kind in 'biuf'):
            refuse('is of dtype {}, the trainer holds {}'.format(
                header.dtype, value.dtype))
    elif isinstance(value, (bool, int, float)) and (
            header.shape != () or header.dtype.kind not in 'biuf'):
        refuse('is {} of {}, expected a number'.format(
            header.shape, header.dtype))


def _check_number(source, name, number, value):
    """:class:`InputError` unless ``number`` can take the place of the
    trainer's count or rate ``value``."""
    def refuse(what):
        raise InputError('{}: {} is {}, expected {}; the snapshot is not one '
                         'this trainer wrote'.format(source, name, number,
                                                     what))
    if isinstance(value, int) and not isinstance(value, bool) and (
            number != int(number) or number < 0):
        refuse('a count (an integer, 0 or more)')
    if isinstance(value, float) and not numpy.isfinite(number):
        refuse('a finite number')
