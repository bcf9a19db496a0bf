"""Snapshot files as the trainer writes them, for the job's tests."""
import os

import chainer

from imagenet_job import snapshots

CONFIG = dict(arch='resnet50', n_class=10, workers=2, batchsize=4,
              accumulate=1)


def configuration(**changes):
    return snapshots.RunConfiguration(**dict(CONFIG, **changes))


def write_snapshot(path, **changes):
    """A snapshot file as a trainer holding ``configuration(**changes)``
    under the name 'run_configuration' writes it."""
    serializer = chainer.serializers.DictionarySerializer()
    configuration(**changes).serialize(
        serializer['extensions']['run_configuration'])
    serializer['updater']('iteration', 7)
    snapshots.AtomicWriter()(os.path.basename(path), os.path.dirname(path),
                             serializer.target)
    return path


def snapshot_in(directory, iteration, **changes):
    return write_snapshot(str(directory / 'snapshot_iter_{}'.format(
        iteration)), **changes)


def tear(path):
    with open(path, 'r+b') as f:
        f.truncate(os.path.getsize(path) // 2)
