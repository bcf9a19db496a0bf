"""imagenet_job.snapshots: atomic writes that leave no torn file and keep
the newest snapshots by iteration."""
import os

import chainer
import numpy

from imagenet_job import resume
from imagenet_job import snapshots
from written_snapshots import snapshot_in


def test_atomic_writer_leaves_only_the_snapshot(tmp_path):
    path = snapshot_in(tmp_path, 3)
    assert os.listdir(str(tmp_path)) == ['snapshot_iter_3']
    assert resume.Snapshot.read(path) is not None
    with numpy.load(path) as archive:
        assert archive['extensions/run_configuration/batchsize'] == 4


def test_the_writer_keeps_the_newest_by_iteration_and_only_snapshots(
        tmp_path):
    """Older snapshots beyond ``keep`` go, oldest iteration first whatever
    their file times; a later one (a damaged one --resume auto skipped), a
    user's file and a folder under the prefix stay."""
    for iteration in (3000, 1000, 2000, 5000):
        snapshot_in(tmp_path, iteration)
    (tmp_path / 'snapshot_iter_best').write_bytes(b'mine')
    (tmp_path / 'snapshot_iter_9x').mkdir()
    serializer = chainer.serializers.DictionarySerializer()
    serializer('iteration', 3100)
    snapshots.AtomicWriter(keep=2)('snapshot_iter_3100', str(tmp_path),
                                   serializer.target)
    assert sorted(os.listdir(str(tmp_path))) == [
        'snapshot_iter_3000', 'snapshot_iter_3100', 'snapshot_iter_5000',
        'snapshot_iter_9x', 'snapshot_iter_best']
