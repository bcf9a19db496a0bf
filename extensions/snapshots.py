"""Atomic snapshots, finding the newest intact one, and resume checks.

A snapshot is written to a temporary file beside its final name, flushed to
disk and renamed over it, so a kill at any moment leaves either the previous
snapshots or the new complete one, never a torn file under a snapshot name.
"""
import errno
import os
import stat
import warnings
import zipfile

import chainer
from chainer.serializers import npz
from chainer.training import extension
from chainer.training.extensions import snapshot_writers
import numpy

from errors import InputError
from extensions import run_directory
from extensions import snapshot_files

#: The name of the snapshot of an iteration: ``SNAPSHOT_NAME.format(i)``.
SNAPSHOT_NAME = snapshot_files.NAME
#: The trained network of a finished run, as a plain Chainer model
#: (:func:`models.plain_copy`).
MODEL_NAME = 'model.npz'


class AtomicWriter(snapshot_writers.Writer):
    """Writes ``outdir/filename`` via a temporary file, fsync and rename.

    With ``keep`` (for snapshots), it then removes the older snapshots
    beyond the newest ``keep``: by iteration, among the regular files named
    ``snapshot_iter_N`` up to the one written. Chainer's own pruning goes by
    file time over every name that starts ``snapshot_iter_`` (a user's
    ``snapshot_iter_best``, a folder) and would delete a resumed run's
    snapshots before a damaged later one that ``--resume auto`` skipped.
    """

    def __init__(self, keep=None):
        super(AtomicWriter, self).__init__()
        self.keep = keep

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
        if self.keep and self.keep > 0:
            self._prune(outdir, snapshot_files.iteration_of(filename))
        self._post_save()

    def _prune(self, outdir, written):
        if written is None:
            return
        older = [name for name in snapshot_files.in_order(os.listdir(outdir))
                 if snapshot_files.iteration_of(name) <= written and
                 is_regular(os.path.join(outdir, name))]
        for name in older[:-self.keep]:
            _remove(os.path.join(outdir, name))


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def snapshot(keep):
    """The trainer snapshot extension, keeping the newest ``keep`` files
    (:class:`AtomicWriter`; all of them where ``keep`` is not positive)."""
    return chainer.training.extensions.snapshot(
        filename=snapshot_files.PATTERN, writer=AtomicWriter(keep))


def is_intact(path):
    """Whether ``path`` is a complete, readable ``.npz`` archive."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


def is_regular(path):
    """Whether ``path`` is a regular file itself: not a link, FIFO, device
    or folder (which ``--resume auto`` never opens)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def latest_snapshot(outdir):
    """The newest intact snapshot in ``outdir`` (None if there is none),
    warning about each damaged one, and each that is not a regular file,
    that is skipped."""
    names = snapshot_files.in_order(os.listdir(outdir)) \
        if os.path.isdir(outdir) else []
    for path in (os.path.join(outdir, name) for name in reversed(names)):
        if not is_regular(path):
            warnings.warn('skipping {}: not a regular file'.format(path))
        elif is_intact(path):
            return path
        else:
            warnings.warn('skipping damaged snapshot {}'.format(path))
    return None


def resume_path(resume, outdir):
    """The snapshot ``resume`` names (``'auto'``: the newest intact one in
    ``outdir``, or None where it holds none; InputError where it holds
    snapshots and none is intact), checked to be a readable file."""
    if resume is None:
        return None
    if resume == 'auto':
        path = latest_snapshot(outdir)
        damaged = [] if path is not None else [
            name for name in snapshot_files.in_order(
                os.listdir(outdir) if os.path.isdir(outdir) else [])
            if is_regular(os.path.join(outdir, name))]
        if damaged:  # starting afresh would overwrite them
            raise InputError(
                '{}: every snapshot in it is damaged ({}); resume from one '
                'with --resume FILE, or move them away to start afresh'
                .format(outdir, ', '.join(damaged)))
        return path
    if os.path.isdir(resume):
        raise InputError('{}: a directory, expected a snapshot file '
                         '(or auto)'.format(resume))
    if not os.path.lexists(resume):
        raise InputError('{}: no such file'.format(resume))
    if not stat.S_ISREG(os.stat(resume).st_mode):
        raise InputError('{}: not a regular file, expected a snapshot'
                         .format(resume))
    if not is_intact(resume):
        raise InputError('{}: damaged or incomplete snapshot'.format(resume))
    return resume


def find_resume(resume, outdir, config, name='run_configuration'):
    """The snapshot to resume from, or None to start afresh.

    ``resume`` is a snapshot's path, ``'auto'`` for the newest intact one in
    ``outdir`` (None if there is none yet), or None. The snapshot must match
    ``config``, the :class:`RunConfiguration` registered under ``name``.
    Raises :class:`InputError` whose message starts with the snapshot's path.
    """
    path = resume_path(resume, outdir)
    if path is None:
        return None
    config.check(path, name)
    return path


class DataDeserializer(npz.NpzDeserializer):
    """Chainer's ``NpzDeserializer`` over an archive opened without pickle,
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
        try:
            data = self.npz[name]
        except ValueError:  # an object array: pickled Python objects
            raise InputError('{}: {} holds Python objects, which are never '
                             'loaded'.format(self.source, name)) from None
        _check_value(self.source, name, data, value)
        if value is None:
            return data
        if isinstance(value, numpy.ndarray):
            numpy.copyto(value, data)
            return value
        if hasattr(value, 'set'):  # a CuPy array
            value.set(numpy.asarray(data, dtype=value.dtype))
            return value
        return type(value)(data)


def _check_value(source, name, data, value):
    """:class:`InputError` unless ``data`` (from the archive) can take the
    place of the trainer's ``value``."""
    def refuse(what):
        raise InputError('{}: {} {}; the snapshot is not one this trainer '
                         'wrote'.format(source, name, what))
    if data.dtype.kind not in 'biufUS':
        refuse('is of dtype {}'.format(data.dtype))
    if value is None:
        return
    if hasattr(value, 'shape') and hasattr(value, 'dtype'):
        if data.shape != value.shape:
            refuse('has shape {}, the trainer holds {}'.format(
                data.shape, value.shape))
        if data.dtype.kind != value.dtype.kind and not (
                data.dtype.kind in 'biu' and value.dtype.kind in 'biuf'):
            refuse('is of dtype {}, the trainer holds {}'.format(
                data.dtype, value.dtype))
        return
    if isinstance(value, (bool, int, float)):
        if data.shape != () or data.dtype.kind not in 'biuf':
            refuse('is {} of {}, expected a number'.format(
                data.shape, data.dtype))
        number = data.item()
        if isinstance(value, int) and not isinstance(value, bool) and (
                number != int(number) or number < 0):
            refuse('is {}, expected a count (an integer, 0 or more)'.format(
                number))
        if isinstance(value, float) and not numpy.isfinite(number):
            refuse('is {}, expected a finite number'.format(number))


def load(path, trainer):
    """Load snapshot ``path`` into ``trainer`` as data
    (:class:`DataDeserializer`). A snapshot that lacks a value the trainer
    holds, holds objects or values of another shape or kind raises
    :class:`InputError` naming the file and the value; nothing is changed on
    disk."""
    with numpy.load(path, allow_pickle=False) as archive:
        try:
            trainer.serialize(DataDeserializer(archive, path))
        except KeyError as e:
            raise InputError(
                '{}: the snapshot holds no {}; it was written by another '
                'version of this trainer; start in a new output directory'
                .format(path, e.args[0])) from None
        except InputError:  # a ValueError that names its value already
            raise
        except (ValueError, TypeError, OSError, zipfile.BadZipFile) as e:
            # an extension's own reading of its value (LogReport's JSON),
            # or a member that does not decompress
            raise InputError('{}: the snapshot holds a value this trainer '
                             'cannot read ({}: {})'.format(
                                 path, type(e).__name__,
                                 str(e).splitlines()[0] if str(e) else ''
                             )) from None


class RunConfiguration(extension.Extension):
    """Stores in every snapshot what a resumed run must share with it.

    ``check(path)`` refuses, with one line naming the difference, a snapshot
    taken with another architecture, class count, per-micro-batch size or
    total minibatch (the data order and the schedules depend on them), or
    another recipe or optimizer (the optimizer's state differs). The split
    of the total between workers and micro-batches (``workers`` x
    ``accumulate``, the virtual workers) may differ: virtual worker v is
    micro-batch v mod K of worker v div K before and after, and every state
    in a snapshot is the same on all workers (docs/reliability.md, "Elastic
    resume"). Snapshots older than the keys in :attr:`LATER_KEYS` lack them
    and are checked on the others. The training set's fingerprint
    (``dataset``, :func:`image_data.fingerprint`) is checked too, unless it is
    one of :attr:`free_keys`. A loaded snapshot leaves this run's values of
    the free keys and of the split (:attr:`SPLIT_KEYS`), which later
    snapshots record.
    """

    trigger = None
    priority = extension.PRIORITY_READER
    #: Keys that snapshots written before them do not hold.
    LATER_KEYS = ('recipe', 'optimizer', 'momentum_correction', 'lars',
                  'dataset', 'bn_variance')
    #: How the virtual workers are split: may change at a resume.
    SPLIT_KEYS = ('workers', 'accumulate')

    def __init__(self, **config):
        self.config = config
        self.free_keys = ()

    def __call__(self, trainer):
        pass

    def serialize(self, serializer):
        loading = isinstance(serializer, chainer.serializer.Deserializer)
        for key, value in sorted(self.config.items()):
            if loading and key in self.free_keys + self.SPLIT_KEYS:
                continue
            try:
                self.config[key] = type(value)(serializer(key, value))
            except KeyError:
                if key not in self.LATER_KEYS:
                    raise

    def _check_total(self, path, stored):
        """The same total minibatch and micro-batch, however split."""
        def total(config):
            return '{} workers x {} micro-batches x {} images = {}'.format(
                config['workers'], config['accumulate'], config['batchsize'],
                config['workers'] * config['accumulate'] *
                config['batchsize'])
        if (stored['workers'] * stored['accumulate'] !=
                self.config['workers'] * self.config['accumulate']
                or stored['batchsize'] != self.config['batchsize']):
            raise InputError(
                '{}: the snapshot was taken with a total minibatch of {}, '
                'this run has {}; resume with the same total and per-micro-'
                'batch size (any split between workers and --accumulate), '
                'or start in a new output directory'.format(
                    path, total(stored), total(self.config)))

    def check(self, path, name):
        """Raise :class:`InputError` unless snapshot ``path`` matches."""
        stored = stored_configuration(path, name)
        if set(self.config) - set(stored) - set(self.LATER_KEYS):
            raise InputError('{}: not a snapshot of this trainer'
                             .format(path))
        split = ()
        if {'workers', 'accumulate', 'batchsize'} <= set(self.config):
            self._check_total(path, stored)
            split = self.SPLIT_KEYS + ('batchsize',)
        for key in (key for key in self.config if key in stored):
            if key in self.free_keys + split:
                continue
            if key == 'dataset' and stored[key] != self.config[key]:
                raise InputError(
                    '{}: the snapshot was trained on another training set '
                    '({}; this run has {}); pass --allow-new-dataset to '
                    'continue on this one'.format(path, stored[key],
                                                  self.config[key]))
            if stored[key] != self.config[key]:
                raise InputError(
                    '{}: the snapshot was taken with {} = {}, this run has '
                    '{}; resume with the same setting or start in a new '
                    'output directory'.format(path, key, stored[key],
                                              self.config[key]))


def stored_configuration(path, name='run_configuration'):
    """The :class:`RunConfiguration` values (registered as ``name``) that
    snapshot ``path`` holds, as a dict."""
    prefix = 'extensions/{}/'.format(name)
    try:
        with numpy.load(path) as archive:
            stored = {key[len(prefix):]: archive[key].item()
                      for key in archive.files if key.startswith(prefix)}
    except (ValueError, OSError, zipfile.BadZipFile) as e:
        raise InputError('{}: not a readable snapshot ({})'.format(path, e))
    for key in COUNT_KEYS:
        value = stored.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < 1:
            raise InputError('{}: its {} is {!r}, expected a positive count; '
                             'the snapshot is not one this trainer wrote'
                             .format(path, key, value))
    return stored


#: The run configuration's counts, which the split of the total reads.
COUNT_KEYS = ('workers', 'accumulate', 'batchsize', 'n_class')


def virtual_workers_per_worker(path, workers):
    """``--accumulate auto``: the micro-batches per worker that keep the
    total of snapshot ``path`` (its workers x micro-batches) on ``workers``
    workers; ``path`` None (nothing to resume) is bad input."""
    if path is None:
        raise InputError('no snapshot to resume from, so no total to keep; '
                         'give the micro-batches per worker')
    stored = stored_configuration(path)
    if not {'workers', 'accumulate'} <= set(stored):
        raise InputError('{}: not a snapshot of this trainer (it records no '
                         'workers and micro-batches)'.format(path))
    total = stored['workers'] * stored['accumulate']
    if total % workers:
        raise InputError(
            '{}: its {} virtual workers ({} workers x {} micro-batches) do '
            'not divide among {} workers'.format(
                path, total, stored['workers'], stored['accumulate'],
                workers))
    return total // workers
