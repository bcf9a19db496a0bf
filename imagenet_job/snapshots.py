"""Atomic snapshots, and the run configuration a resume is checked against.

A snapshot is written to a temporary file beside its final name, flushed to
disk and renamed over it, so a kill at any moment leaves either the previous
snapshots or the new complete one, never a torn file under a snapshot name.
"""
import errno
import os

import chainer
from chainer.serializers import npz
from chainer.training import extension
from chainer.training.extensions import snapshot_writers

from imagenet_job import run_directory
from imagenet_job import snapshot_files
from largebatch import outputs
from largebatch.errors import InputError


class AtomicWriter(snapshot_writers.Writer):
    """Writes ``outdir/filename`` via a temporary file, fsync and rename
    (:func:`largebatch.outputs.write_replacing`).

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
        try:  # uncompressed: 20x faster for ResNet-50, 8% larger
            outputs.write_replacing(path, lambda f: npz.save_npz(
                f, target, compression=False), force=True)
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise run_directory.NoSpace(
                path, run_directory.free_bytes(outdir),
                note='the snapshots written before it are intact') from None
        if self.keep and self.keep > 0:
            self._prune(outdir, snapshot_files.iteration_of(filename))
        self._post_save()

    def _prune(self, outdir, written):
        if written is None:
            return
        older = [name for name in snapshot_files.in_order(os.listdir(outdir))
                 if snapshot_files.iteration_of(name) <= written and
                 snapshot_files.is_regular(os.path.join(outdir, name))]
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

    def check(self, snapshot, name):
        """Raise :class:`InputError` unless ``snapshot``
        (:class:`~imagenet_job.resume.Snapshot`) matches."""
        path = snapshot.path
        stored = snapshot.configuration(name)
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
