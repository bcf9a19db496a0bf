"""imagenet_job.run_directory: the lock, the refusal of another run's
directory and the free-space check."""
import fcntl
import os
import subprocess
import sys

import pytest

from imagenet_job import run_directory


def test_claim_creates_and_locks_the_directory(tmp_path):
    out = str(tmp_path / 'new' / 'run')
    lock = run_directory.claim(out)
    with open(os.path.join(out, '.lock')) as f:
        assert f.read().startswith('process {} on '.format(os.getpid()))
        with pytest.raises(OSError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with pytest.raises(run_directory.DirectoryInUse,
                       match=r'is in use by a running job \(process {} '
                       .format(os.getpid())):
        run_directory.claim(out)
    lock.close()
    run_directory.claim(out).close()  # free again


def test_a_file_in_the_way_is_named(tmp_path):
    path = tmp_path / 'file'
    path.write_text('kept')
    with pytest.raises(run_directory.FileInTheWay) as e:
        run_directory.claim(str(path))
    assert str(e.value) == '{}: it is a file, not a directory'.format(path)
    with pytest.raises(run_directory.FileInTheWay) as e:
        run_directory.claim(str(path / 'run'))
    assert str(e.value) == '{}: {} is a file, not a directory'.format(
        path / 'run', path)
    assert path.read_text() == 'kept'


def test_a_killed_holder_releases_the_lock(tmp_path):
    out = str(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import sys, time; from imagenet_job import '
         'run_directory; lock = run_directory.claim('
         'sys.argv[1]); print(1, flush=True); time.sleep(60)', out],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))
    assert holder.stdout.readline() == b'1\n', holder.stderr.read()
    with pytest.raises(run_directory.DirectoryInUse):
        run_directory.claim(out)
    holder.kill()
    holder.wait()
    run_directory.claim(out).close()


@pytest.mark.parametrize('files, resume, refused', [
    ([], None, False),
    (['.lock', 'launch.sh', 'job.log', 'hostfile'], None, False),
    (['log'], None, True),
    (['model.npz'], None, True),
    (['snapshot_iter_3', 'snapshot_iter_12', 'log'], None, True),
    (['snapshot_iter_3'], 'auto', False),
    (['snapshot_iter_3'], '{here}/snapshot_iter_3', False),
    (['snapshot_iter_3'], '{elsewhere}/snapshot_iter_9', True),
])
def test_another_run_is_refused(tmp_path, files, resume, refused):
    here, elsewhere = tmp_path / 'here', tmp_path / 'elsewhere'
    here.mkdir()
    elsewhere.mkdir()
    for name in files:
        (here / name).write_text('')
    if resume:
        resume = resume.format(here=here, elsewhere=elsewhere)
    if not refused:
        run_directory.check_not_another_run(str(here), resume)
        return
    with pytest.raises(run_directory.HoldsAnotherRun) as info:
        run_directory.check_not_another_run(str(here), resume)
    newest = [f for f in files if f == 'snapshot_iter_12'] or [
        f for f in files if f.startswith('snapshot')]
    assert str(info.value) == '{} holds another run ({})'.format(
        here, ', '.join(newest + [f for f in files
                                  if f in ('log', 'model.npz')]))


def test_a_rollback_among_later_snapshots_is_refused(tmp_path):
    """Resuming from snapshot 3000 beside 4000 and 5000: pruning would
    delete 3000 first and --resume auto would take up 5000 again."""
    for name in ('snapshot_iter_3000', 'snapshot_iter_4000',
                 'snapshot_iter_5000', 'log'):
        (tmp_path / name).write_text('')
    start = str(tmp_path / 'snapshot_iter_3000')
    with pytest.raises(run_directory.LaterSnapshots) as info:
        run_directory.check_not_another_run(str(tmp_path), start)
    assert str(info.value) == (
        '{} holds later snapshots of the run (snapshot_iter_4000, '
        'snapshot_iter_5000); resume from it into another --out (--out NEW '
        '--resume {}), or move them away'.format(tmp_path, start))
    run_directory.check_not_another_run(
        str(tmp_path), str(tmp_path / 'snapshot_iter_5000'))


def test_free_space(tmp_path):
    run_directory.check_free_space(str(tmp_path), 1)
    with pytest.raises(run_directory.NoSpace,
                       match=r'no space left on its file system \(.* free, '
                       r'1024\.0 GiB needed\)'):
        run_directory.check_free_space(str(tmp_path), 2 ** 40)
    assert os.listdir(str(tmp_path)) == []


def test_a_directory_of_a_users_files_is_refused_untouched(tmp_path):
    """``--out .`` in a home folder: nothing there is replaced, removed or
    added, not even the lock."""
    names = ['notes.txt', 'args', 'log', '.bashrc.tmp123', 'loss.png']
    for name in names:
        (tmp_path / name).write_text('mine: ' + name)
    before = {name: os.stat(str(tmp_path / name)) for name in names}
    with pytest.raises(run_directory.NotARun) as info:
        run_directory.claim(str(tmp_path))
    assert str(info.value) == (
        '{} holds files this trainer did not write (args, log, loss.png, '
        '...); choose a new or empty --out'.format(tmp_path))
    assert sorted(os.listdir(str(tmp_path))) == sorted(names)
    for name in names:
        assert (tmp_path / name).read_text() == 'mine: ' + name
        assert os.stat(str(tmp_path / name)).st_mtime_ns == \
            before[name].st_mtime_ns


@pytest.mark.parametrize('files, is_run', [
    ([], False),
    (['.lock', 'job.record', 'launch.sh', 'job.log', 'hostfile'], True),
    (['.lock', 'launch.sh', 'job.log', 'hostfile', '.log.tmp9'], False),
    (['args.json', 'log', 'notes.txt'], True),
])
def test_new_empty_or_a_run_of_this_project_is_taken(
        tmp_path, files, is_run):
    for name in files:
        (tmp_path / name).write_text('')
    assert run_directory.check_owned(str(tmp_path)) == is_run
    assert run_directory.check_owned(str(tmp_path / 'new')) is False


@pytest.mark.parametrize('make', [
    lambda path: os.mkdir(path),
    lambda path: os.symlink('elsewhere', path),
    lambda path: os.mkfifo(path),
])
def test_a_record_that_is_no_regular_file_makes_no_run(tmp_path, make):
    make(str(tmp_path / 'args.json'))
    with pytest.raises(run_directory.NotARun, match=r'\(args\.json\)'):
        run_directory.check_owned(str(tmp_path))


@pytest.mark.parametrize('make', [
    lambda path: open(path, 'w').close(),
    lambda path: os.mkfifo(path),
])
def test_a_tensorboard_file_is_refused_at_the_start(tmp_path, make):
    run_directory.check_folder(str(tmp_path), 'tensorboard')
    (tmp_path / 'tensorboard').mkdir()
    run_directory.check_folder(str(tmp_path), 'tensorboard')
    os.rmdir(str(tmp_path / 'tensorboard'))
    make(str(tmp_path / 'tensorboard'))
    with pytest.raises(run_directory.FileInTheWay) as info:
        run_directory.check_folder(str(tmp_path), 'tensorboard')
    assert str(info.value) == (
        '{} is not a folder; the trainer writes its tensorboard files in '
        'it: move it away'.format(tmp_path / 'tensorboard'))
