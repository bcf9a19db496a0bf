"""Files in --out are opened safely: the lock never through a link or into
a FIFO, snapshot candidates only when regular files, a killed writer's
temporary files removed by the next run."""
import os
import re
import threading

import chainer
import numpy
import pytest

from imagenet_job import run_directory
from imagenet_job import resume
from largebatch.errors import InputError


def test_a_lock_that_is_a_link_is_refused_and_its_target_untouched(
        tmp_path):
    target = tmp_path / 'precious'
    target.write_text('keep me\n')
    out = tmp_path / 'out'
    out.mkdir()
    os.symlink(str(target), str(out / '.lock'))
    with pytest.raises(run_directory.FileInTheWay,
                       match=r'\.lock is a symbolic link; remove it$'):
        run_directory.claim(str(out))
    assert target.read_text() == 'keep me\n'


def test_a_lock_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(str(tmp_path / '.lock'))
    with pytest.raises(run_directory.FileInTheWay,
                       match=r'\.lock is not a regular file; remove it$'):
        run_directory.claim(str(tmp_path))


def write_snapshot(path):
    chainer.serializers.save_npz(path, chainer.links.Linear(2, 2))


def test_resume_auto_skips_what_is_not_a_regular_file(tmp_path):
    write_snapshot(str(tmp_path / 'snapshot_iter_5'))
    os.mkfifo(str(tmp_path / 'snapshot_iter_999'))
    os.symlink(str(tmp_path / 'snapshot_iter_5'),
               str(tmp_path / 'snapshot_iter_998'))
    found = []
    worker = threading.Thread(target=lambda: found.append(
        resume.latest_snapshot(str(tmp_path)).path), daemon=True)
    with pytest.warns(UserWarning, match='not a regular file'):
        worker.start()
        worker.join(10)
    assert found == [str(tmp_path / 'snapshot_iter_5')]


def resume_path(outdir):
    """The path of the snapshot ``--resume auto`` reads, or None."""
    snapshot = resume.resume_snapshot('auto', outdir)
    return None if snapshot is None else snapshot.path


def test_resume_auto_over_only_damaged_snapshots_is_refused(tmp_path):
    """Starting afresh there would overwrite the run's log and prune its
    snapshots; a directory without snapshots starts afresh."""
    assert resume_path(str(tmp_path)) is None
    (tmp_path / 'log').write_text('[]')
    assert resume_path(str(tmp_path)) is None
    (tmp_path / 'snapshot_iter_90').write_bytes(b'PK\x03\x04 torn')
    with pytest.warns(UserWarning, match='skipping damaged snapshot'):
        with pytest.raises(InputError, match=r'^{}: every snapshot '
                           r'in it is damaged \(snapshot_iter_90\); resume '
                           r'from one with --resume FILE'.format(
                               re.escape(str(tmp_path)))):
            resume_path(str(tmp_path))
    write_snapshot(str(tmp_path / 'snapshot_iter_5'))
    with pytest.warns(UserWarning, match='skipping damaged snapshot'):
        assert resume_path(str(tmp_path)) == str(
            tmp_path / 'snapshot_iter_5')


def test_resume_of_a_fifo_is_one_line(tmp_path):
    os.mkfifo(str(tmp_path / 'snap'))
    with pytest.raises(InputError, match='not a regular file'):
        resume.find_resume(str(tmp_path / 'snap'), str(tmp_path), None)


def test_a_killed_writers_temporary_files_are_removed(tmp_path):
    leftovers = ['.snapshot_iter_40.tmp1234', '.model.npz.tmp77',
                 '.space.tmp99', '.loss.png.tmp0.png']
    kept = ['snapshot_iter_40', 'log', '.snapshot_iter_40.tmpx', 'args.json']
    for name in leftovers + kept:
        (tmp_path / name).write_bytes(numpy.zeros(3).tobytes())
    lock = run_directory.claim(str(tmp_path))
    lock.close()
    assert sorted(os.listdir(str(tmp_path))) == sorted(kept + ['.lock'])


def test_temporary_names_outside_a_run_are_left_alone(tmp_path):
    """A directory with no record of a run holds nothing the trainer wrote:
    what looks like its temporary files may be a user's."""
    names = ['.notes.txt.tmp1234', '.space.tmp99', 'launch.sh', 'job.log']
    for name in names:
        (tmp_path / name).write_text('mine')
    run_directory.claim(str(tmp_path)).close()
    assert sorted(os.listdir(str(tmp_path))) == sorted(names + ['.lock'])
    assert all((tmp_path / name).read_text() == 'mine' for name in names)


def test_a_killed_writers_temporary_link_goes_and_its_target_stays(tmp_path):
    target = tmp_path / 'precious'
    target.write_text('keep me\n')
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'args.json').write_text('[]')
    os.symlink(str(target), str(out / '.loss.png.tmp0.png'))
    run_directory.claim(str(out)).close()
    assert sorted(os.listdir(str(out))) == ['.lock', 'args.json']
    assert target.read_text() == 'keep me\n'


@pytest.mark.parametrize('name', ['log', 'loss.png', 'model.npz',
                                  'tensorboard', 'snapshot_iter_best'])
def test_a_link_the_trainer_would_write_through_is_refused(tmp_path, name):
    target = tmp_path / 'precious'
    target.mkdir()
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'args.json').write_text('[]')
    os.symlink(str(target), str(out / name))
    with pytest.raises(run_directory.FileInTheWay,
                       match=r'^{} is a symbolic link; the trainer writes '
                       r'through none in --out: remove it$'.format(
                           re.escape(str(out / name)))):
        run_directory.claim(str(out))
    assert os.listdir(str(target)) == []
    # a snapshot's name is the snapshot reader's to skip
    os.remove(str(out / name))
    os.symlink(str(target), str(out / 'snapshot_iter_7'))
    run_directory.claim(str(out)).close()
