"""imagenet_job.resume: finding the snapshot to resume from, reading it once,
and the checks that refuse a snapshot."""
import re

import numpy
import pytest

from imagenet_job import resume
from largebatch.errors import InputError
from written_snapshots import configuration
from written_snapshots import snapshot_in
from written_snapshots import tear


def find_resume(*args, **kwargs):
    """The path of the snapshot :func:`resume.find_resume` read, or None."""
    snapshot = resume.find_resume(*args, **kwargs)
    return None if snapshot is None else snapshot.path


def virtual_workers_per_worker(path, workers):
    return resume.virtual_workers_per_worker(resume.Snapshot.read(path),
                                             workers)


def test_no_resume_starts_afresh(tmp_path):
    snapshot_in(tmp_path, 3)
    assert find_resume(None, str(tmp_path), configuration()) is None


def test_auto_without_snapshots_starts_afresh(tmp_path):
    assert find_resume('auto', str(tmp_path / 'new'),
                       configuration()) is None


def test_auto_takes_the_newest_intact_snapshot(tmp_path):
    for iteration in (3, 12, 6, 20):
        snapshot_in(tmp_path, iteration)
    tear(str(tmp_path / 'snapshot_iter_20'))
    (tmp_path / 'snapshot_iter_30.tmp').write_bytes(b'')  # not a snapshot
    (tmp_path / 'snapshot_iter_x').write_bytes(b'')
    with pytest.warns(UserWarning, match='skipping damaged snapshot .*_20'):
        found = find_resume('auto', str(tmp_path), configuration())
    assert found == str(tmp_path / 'snapshot_iter_12')


def flip_a_header_byte(path):
    """Change the .npy magic of the file's first member, as a flipped bit
    on disk would: its header no longer reads, its CRC no longer holds."""
    with open(path, 'rb') as f:
        data = f.read()
    at = data.index(b'\x93NUMPY')
    with open(path, 'r+b') as f:
        f.seek(at)
        f.write(b'\x94')


def test_auto_skips_a_snapshot_whose_header_a_flipped_bit_damaged(tmp_path):
    snapshot_in(tmp_path, 3)
    flip_a_header_byte(snapshot_in(tmp_path, 6))
    with pytest.warns(UserWarning, match='skipping damaged snapshot .*_6'):
        found = find_resume('auto', str(tmp_path), configuration())
    assert found == str(tmp_path / 'snapshot_iter_3')


def test_auto_checks_the_configuration_too(tmp_path):
    snapshot_in(tmp_path, 3, workers=1)
    with pytest.raises(InputError, match='taken with a total minibatch of 1 '
                       'workers x'):
        find_resume('auto', str(tmp_path), configuration())


def test_a_snapshot_of_the_same_total_on_another_split_is_accepted(
        tmp_path):
    path = snapshot_in(tmp_path, 3, workers=4, accumulate=2)
    config = configuration(workers=2, accumulate=4)
    assert find_resume(path, str(tmp_path), config) == path
    assert virtual_workers_per_worker(path, 1) == 8
    with pytest.raises(InputError, match='its 8 virtual workers \\(4 workers '
                       'x 2 micro-batches\\) do not divide among 3 workers'):
        virtual_workers_per_worker(path, 3)


@pytest.mark.parametrize('key, value, shown', [
    ('workers', '2', "'2'"), ('workers', 0, '0'), ('accumulate', 2.5, '2.5'),
    ('batchsize', True, 'True')])
def test_a_snapshot_whose_counts_are_not_counts_is_refused(tmp_path, key,
                                                           value, shown):
    path = snapshot_in(tmp_path, 3, **{key: value})
    message = r'^{}: its {} is {}, expected a positive count'.format(
        re.escape(path), key, re.escape(shown))
    with pytest.raises(InputError, match=message):
        virtual_workers_per_worker(path, 1)
    with pytest.raises(InputError, match=message):
        find_resume(path, str(tmp_path), configuration())


def test_a_given_snapshot_that_matches(tmp_path):
    path = snapshot_in(tmp_path, 3)
    assert find_resume(path, str(tmp_path / 'elsewhere'),
                       configuration()) == path


@pytest.mark.parametrize('key, value, message', [
    ('batchsize', 8, 'a total minibatch of 2 workers x 1 micro-batches x 4 '
     'images = 8, this run has 2 workers x 1 micro-batches x 8 images = '
     '16'),
    ('n_class', 12, 'n_class = 10, this run has 12'),
    ('arch', 'resnet101', 'arch = resnet50, this run has resnet101')])
def test_a_snapshot_of_another_setting_is_refused(tmp_path, key, value,
                                                  message):
    path = snapshot_in(tmp_path, 3)
    with pytest.raises(InputError) as info:
        find_resume(path, str(tmp_path), configuration(**{key: value}))
    assert str(info.value).startswith(
        '{}: the snapshot was taken with {}; resume with the same '.format(
            path, message))
    assert str(info.value).endswith('start in a new output directory')


def test_a_missing_damaged_or_foreign_file_is_refused(tmp_path):
    missing = str(tmp_path / 'nope')
    with pytest.raises(InputError, match='^/.*nope: no such file'):
        find_resume(missing, str(tmp_path), configuration())
    with pytest.raises(InputError) as info:
        find_resume(str(tmp_path), str(tmp_path), configuration())
    assert str(info.value) == (
        '{}: a directory, expected a snapshot file (or auto)'.format(
            tmp_path))
    torn = snapshot_in(tmp_path, 5)
    tear(torn)
    with pytest.raises(InputError, match='damaged or incomplete snapshot'):
        find_resume(torn, str(tmp_path), configuration())
    foreign = str(tmp_path / 'weights.npz')
    numpy.savez(foreign, w=numpy.zeros(3))
    with pytest.raises(InputError, match='not a snapshot of this trainer'):
        find_resume(foreign, str(tmp_path), configuration())


class Holder(object):
    """What ``write_snapshot`` stored: a configuration and an iteration."""

    def __init__(self, config):
        self.config, self.iteration = config, 0

    def serialize(self, serializer):
        self.config.serialize(serializer['extensions']['run_configuration'])
        self.iteration = serializer['updater']('iteration', self.iteration)


def test_a_resume_opens_its_snapshot_once(tmp_path, monkeypatch):
    """Found, split by --accumulate auto, checked against the run's
    configuration and loaded from one reading of the file."""
    import builtins
    path = snapshot_in(tmp_path, 3, workers=4, accumulate=2)
    opened = []
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        opened.append(file)
        return real_open(file, *args, **kwargs)
    monkeypatch.setattr(builtins, 'open', counting_open)
    snapshot = resume.resume_snapshot('auto', str(tmp_path))
    assert resume.virtual_workers_per_worker(snapshot, 2) == 4
    config = configuration(workers=2, accumulate=4)
    snapshot = resume.find_resume('auto', str(tmp_path), config,
                                  snapshot=snapshot)
    holder = Holder(config)
    snapshot.load_into(holder)
    assert holder.iteration == 7
    assert opened.count(path) == 1
