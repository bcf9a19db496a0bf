"""Kill-and-resume, the divergence guard, worker failure and bad input."""
import fcntl
import json
import math
import os
import pathlib
import pty
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy
import pytest
from PIL import Image

from conftest import LAUNCH_FAILED, mpi_command, REPO, run_mpi
from largebatch import errors
from imagenet_job import resume

SMALL = ['train_imagenet.py', '--demo', '--batchsize', '4', '--loaderjob',
         '0', '--log-interval', '1', '--val_batchsize', '50']
TIMING = ('elapsed_time', 'images/s')


def read_log(out):
    with open(os.path.join(out, 'log')) as f:
        return [{k: v for k, v in entry.items() if k not in TIMING}
                for entry in json.load(f)]


def snapshot_params(path):
    with numpy.load(path) as snapshot:
        return {k: snapshot[k] for k in snapshot.files
                if k.startswith('updater/model:main/')}


def start_job(args, out, iterations, stdout=subprocess.PIPE, timeout=120,
              processes=2):
    """``mpiexec -n 2`` of the trainer writing to ``out``, in the background,
    returned once its log holds ``iterations`` entries (``processes`` None:
    one process, without a launcher). A launch whose PMIx server failed to
    start, before any rank ran, is tried once more (as ``run_mpi`` does)."""
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=REPO)
    argv = args + ['--out', out]
    for _ in range(2):
        proc = subprocess.Popen(mpi_command(processes, argv) if processes
                                else [sys.executable] + argv,
                                cwd=REPO, env=env, stdout=stdout,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.time() + timeout
        while time.time() < deadline and proc.poll() is None:
            try:
                if len(read_log(out)) >= iterations:
                    return proc
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            raise AssertionError('run did not reach iteration {} in {} s'
                                 .format(iterations, timeout))
        _, stderr = proc.communicate()
        if LAUNCH_FAILED not in stderr:
            break
    raise AssertionError('run ended with {} before iteration {}:\n{}'.format(
        proc.returncode, iterations, stderr[-4000:]))


def worker_pids(out, launcher_pid):
    found = subprocess.run(['pgrep', '-f', '--', '--out ' + out],
                           capture_output=True, text=True).stdout.split()
    return [int(p) for p in found if int(p) != launcher_pid]


def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path):
    args = SMALL + ['--iterations', '12', '--snapshot-iterations', '3']
    ref = str(tmp_path / 'ref')
    run_mpi(2, args + ['--out', ref])

    out = str(tmp_path / 'killed')
    kill_at = numpy.random.RandomState().randint(4, 10)
    proc = start_job(args, out, kill_at, stdout=subprocess.DEVNULL)
    os.kill(worker_pids(out, proc.pid)[0], signal.SIGKILL)
    start = time.time()
    proc.wait(timeout=60)
    assert proc.returncode != 0
    assert time.time() - start < 30  # the job ends, no worker hangs

    # What a kill in the middle of a snapshot write could leave behind.
    newest = max(int(f.rsplit('_', 1)[1]) for f in os.listdir(out)
                 if f.startswith('snapshot_iter_'))
    with open(os.path.join(out, 'snapshot_iter_{}'.format(newest)), 'rb') as f:
        head = f.read(1000)
    with open(os.path.join(out, 'snapshot_iter_99'), 'wb') as f:
        f.write(head)  # a torn file under a snapshot name
    with open(os.path.join(out, '.snapshot_iter_100.tmp1'), 'wb') as f:
        f.write(head)

    resumed = run_mpi(2, args + ['--out', out, '--resume', 'auto'])
    assert 'skipping damaged snapshot' in resumed.stderr
    assert 'resuming from {}'.format(
        os.path.join(out, 'snapshot_iter_{}'.format(newest))) in resumed.stdout
    assert read_log(out) == read_log(ref)
    final, expected = (snapshot_params(os.path.join(d, 'snapshot_iter_12'))
                       for d in (out, ref))
    assert final.keys() == expected.keys() and len(final) > 100
    for key in expected:
        assert (final[key] == expected[key]).all(), key


def test_divergence_stops_and_leaves_the_last_snapshot_loadable(tmp_path):
    out = str(tmp_path / 'out')
    args = SMALL + ['--recipe', 'sgd', '--lr', '1e30',
                    '--snapshot-iterations', '1', '--out', out]
    proc = run_mpi(2, args + ['--iterations', '6'], check=False)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines()
             if 'error' in line]
    assert len(lines) == 1, proc.stderr
    assert 'error: all-reduced gradient diverged: ' in lines[0]
    assert 'non-finite element(s)' in lines[0]
    diverged_at = int(lines[0].split('at iteration ')[1].split(';')[0])
    snapshots = sorted(f for f in os.listdir(out)
                       if f.startswith('snapshot_iter_'))
    assert snapshots[-1] == 'snapshot_iter_{}'.format(diverged_at - 1)
    for value in snapshot_params(os.path.join(out, snapshots[-1])).values():
        assert numpy.isfinite(value).all()
    # The trainer loads it (and, having reached --iterations, stops).
    resumed = run_mpi(2, args + ['--resume', 'auto', '--iterations',
                                 str(diverged_at - 1)])
    assert 'resuming from ' + os.path.join(out, snapshots[-1]) in \
        resumed.stdout


def test_skip_policy_counts_skipped_updates(tmp_path):
    out = str(tmp_path / 'out')
    run_mpi(2, SMALL + ['--recipe', 'sgd', '--iterations', '4', '--lr',
                        '1e30', '--on-non-finite', 'skip', '--out', out])
    skipped = [e['skipped_updates'] for e in read_log(out)]
    assert skipped[0] == 0 and skipped[-1] >= 2
    assert skipped == sorted(skipped)


def folder_with_a_bad_image(root):
    """``root/a/0-7.jpg``, 36x36 images, 3.jpg truncated."""
    train = root / 'a'
    os.makedirs(str(train))
    for i in range(8):
        Image.new('RGB', (36, 36), (i, i, i)).save(
            str(train / '{}.jpg'.format(i)))
    with open(str(train / '3.jpg'), 'r+b') as f:
        f.truncate(300)
    return str(root)


def test_a_worker_that_raises_ends_the_job(tmp_path):
    folder_with_a_bad_image(tmp_path / 'train')
    out = str(tmp_path / 'out')
    # Short: the session directory below it must leave room for a socket.
    tmp = pathlib.Path(tempfile.mkdtemp(dir='/tmp'))
    start = time.time()
    proc = run_mpi(2, ['train_imagenet.py', str(tmp_path / 'train'),
                       str(tmp_path / 'train'), '--batchsize', '4',
                       '--crop-size', '32', '--loaderjob', '1',
                       '--iterations', '4', '--out', out], check=False,
                   timeout=120, env={'TMPDIR': str(tmp)})
    assert proc.returncode != 0
    assert time.time() - start < 90
    assert 'Traceback' not in proc.stderr
    errors = [line for line in proc.stderr.splitlines()
              if 'error:' in line]
    assert len(errors) == 1, proc.stderr
    assert '3.jpg: cannot be decoded' in errors[0]
    assert '--skip-bad-images' in errors[0]
    assert 'resource_tracker' not in proc.stderr
    deadline = time.time() + 10  # the loaders' helpers end just after
    while os.listdir(str(tmp)) and time.time() < deadline:
        time.sleep(0.1)
    assert os.listdir(str(tmp)) == []  # no pymp-* folder, no session
    tmp.rmdir()

    skipped = run_mpi(2, ['train_imagenet.py', str(tmp_path / 'train'),
                          str(tmp_path / 'train'), '--batchsize', '4',
                          '--crop-size', '32', '--loaderjob', '1',
                          '--iterations', '4', '--log-interval', '1',
                          '--skip-bad-images', '--out', out])
    assert max(e.get('skipped_images', 0) for e in read_log(out)) >= 1
    assert 'Traceback' not in skipped.stderr


def one_line_error(args, cwd=REPO):
    proc = run_mpi(1, args, check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture(scope='module')
def demo_snapshot(tmp_path_factory):
    out = str(tmp_path_factory.mktemp('snap'))
    run_mpi(1, SMALL + ['--iterations', '1', '--snapshot-iterations', '1',
                        '--out', out])
    return os.path.join(out, 'snapshot_iter_1')


def test_resume_with_another_setting_is_refused(demo_snapshot):
    with open(demo_snapshot, 'rb') as f:
        before = f.read()
    for flags, key in ((['--n-class', '12'], 'n_class = 10'),
                       (['--batchsize', '8'], 'a total minibatch of 1 '
                        'workers x 1 micro-batches x 4 images = 4'),
                       (['--accumulate', '2'], 'a total minibatch of 1 '
                        'workers x 1 micro-batches x 4 images = 4, this run '
                        'has 1 workers x 2'),
                       (['--bn-stats', 'moving-average'],
                        'bn_stats = final-batch'),
                       (['--recipe', 'sgd'], 'recipe = akiba2017'),
                       (['--recipe', 'goyal2017'], 'recipe = akiba2017'),
                       (['--optimizer', 'momentum-sgd'],
                        'optimizer = rmsprop-warmup'),
                       (['--lars'], 'lars = False')):
        args = SMALL + ['--iterations', '2', '--resume', demo_snapshot,
                        '--out', os.path.dirname(demo_snapshot)] + flags
        msg = one_line_error(args)
        assert '--resume {}: the snapshot was taken with {}'.format(
            demo_snapshot, key) in msg
    with open(demo_snapshot, 'rb') as f:
        assert f.read() == before  # nothing written before is lost


def test_resume_on_another_training_set_needs_allow_new_dataset(
        demo_snapshot, tmp_path):
    train = os.path.join(REPO, 'image_data', 'demo', 'train')
    listing = tmp_path / 'train.txt'
    with open(listing, 'w') as f:
        for label, folder in enumerate(sorted(os.listdir(train))):
            for name in sorted(os.listdir(os.path.join(train, folder)))[:5]:
                f.write('{} {}\n'.format(os.path.join(train, folder, name),
                                         label))
    out = os.path.dirname(demo_snapshot)
    args = [a for a in SMALL if a != '--demo'] + [
        str(listing), os.path.join(REPO, 'image_data', 'demo', 'val'),
        '--crop-size', '32', '--n-class', '10', '--iterations', '2',
        '--resume', demo_snapshot,
        '--out', out]
    msg = one_line_error(args)
    assert re.match(r'.*--resume {}: the snapshot was trained on another '
                    r'training set \(3000 images, sha256 \w+; this run has '
                    r'50 images, sha256 \w+\); pass --allow-new-dataset'
                    .format(re.escape(demo_snapshot)), msg), msg
    run_mpi(1, args[:-2] + ['--out', str(tmp_path / 'new'),
                            '--allow-new-dataset'])


def test_resume_with_another_worker_count_is_refused(demo_snapshot, tmp_path):
    proc = run_mpi(2, SMALL + ['--iterations', '2', '--resume', demo_snapshot,
                               '--out', str(tmp_path)], check=False)
    assert proc.returncode != 0
    assert proc.stderr.count('the snapshot was taken with a total minibatch '
                             'of 1 workers x 1 micro-batches x 4 images = 4, '
                             'this run has 2 workers x 1 micro-batches x 4 '
                             'images = 8') == 1


def test_resume_from_a_snapshot_that_lacks_a_value_is_refused(demo_snapshot,
                                                              tmp_path):
    # What a snapshot of an older trainer whose optimizer kept other state
    # looks like: every value of this one but a buffer of an update rule.
    old = str(tmp_path / 'snapshot_iter_1')
    with numpy.load(demo_snapshot) as snapshot:
        dropped = sorted(k for k in snapshot.files if k.startswith(
            'updater/optimizer:main/predictor/'))[0]
        numpy.savez(old, **{k: snapshot[k] for k in snapshot.files
                            if k != dropped})
    os.rename(old + '.npz', old)
    with open(old, 'rb') as f:
        before = f.read()
    msg = one_line_error(SMALL + ['--iterations', '2', '--resume', old,
                                  '--out', str(tmp_path / 'out')])
    assert msg == ('train_imagenet.py: error: --resume {}: the snapshot holds '
                   'no {}; it was written by another version of this '
                   'trainer; start in a new output directory'.format(
                       old, dropped))
    with open(old, 'rb') as f:
        assert f.read() == before  # nothing written before is lost


def test_a_snapshot_only_rank_0_cannot_read_ends_every_worker(tmp_path):
    """LogReport reads its log from a snapshot as JSON, on rank 0 alone: a
    snapshot whose log is not JSON fails there only, and every worker ends
    with its one line instead of waiting for rank 0 in a collective."""
    out = str(tmp_path / 'run')
    run_mpi(2, SMALL + ['--iterations', '1', '--snapshot-iterations', '1',
                        '--out', out])
    bad = str(tmp_path / 'snapshot_iter_1')
    with numpy.load(os.path.join(out, 'snapshot_iter_1')) as snapshot:
        values = {k: snapshot[k] for k in snapshot.files}
    values['extensions/LogReport/_log'] = numpy.array('not json')
    numpy.savez(bad, **values)
    os.rename(bad + '.npz', bad)
    proc = run_mpi(2, SMALL + ['--iterations', '2', '--resume', bad,
                               '--out', str(tmp_path / 'resumed')],
                   check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert 'Traceback' not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if 'error:' in line]
    assert errors == [
        'train_imagenet.py: error: --resume {}: the snapshot holds a value '
        'this trainer cannot read (JSONDecodeError: Expecting value: line 1 '
        'column 1 (char 0))'.format(bad)], proc.stderr


def test_resume_from_a_damaged_or_foreign_file_is_refused(tmp_path):
    torn = tmp_path / 'snapshot_iter_5'
    torn.write_bytes(b'PK\x03\x04 torn')
    assert 'damaged or incomplete snapshot' in one_line_error(
        SMALL + ['--resume', str(torn), '--out', str(tmp_path / 'out')])
    foreign = str(tmp_path / 'weights.npz')
    numpy.savez(foreign, w=numpy.zeros(3))
    assert zipfile.is_zipfile(foreign)
    assert 'not a snapshot of this trainer' in one_line_error(
        SMALL + ['--resume', foreign, '--out', str(tmp_path / 'out')])


def test_unwritable_output_directory(tmp_path):
    # /proc takes no new folder, not even from root
    msg = one_line_error(SMALL + ['--out', '/proc/out'])
    assert msg.startswith('train_imagenet.py: error: --out /proc/out: not '
                          'writable (')
    blocker = tmp_path / 'file'
    blocker.write_text('')
    msg = one_line_error(SMALL + ['--out', str(blocker / 'out')])
    assert msg.endswith('--out {}: {} is a file, not a directory'.format(
        blocker / 'out', blocker))


def test_per_worker_batch_larger_than_its_shard(tmp_path):
    train = tmp_path / 'train' / 'a'
    os.makedirs(str(train))
    for i in range(5):
        Image.new('RGB', (36, 36)).save(str(train / '{}.jpg'.format(i)))
    msg = one_line_error(['train_imagenet.py', str(tmp_path / 'train'),
                          str(tmp_path / 'train'), '--batchsize', '8',
                          '--crop-size', '32', '--out', str(tmp_path / 'o')])
    assert ('total minibatch 8 (--batchsize x --accumulate x 1 workers) is '
            'larger than the training set (5 images)') in msg


def test_mean_file_of_the_wrong_shape(tmp_path):
    mean = str(tmp_path / 'mean.npy')
    numpy.save(mean, numpy.zeros((3, 224, 224)))
    msg = one_line_error(SMALL + ['--mean', mean, '--out',
                                  str(tmp_path / 'out')])
    assert '--mean {}: shape (3, 224, 224) is neither (3,) nor (3, 37, 37)'\
        .format(mean) in msg


TINY = SMALL + ['--width', '0.125']


def rank_pids(out, launcher_pid):
    found = worker_pids(out, launcher_pid)
    assert len(found) == 2, found
    return sorted(found)


@pytest.mark.parametrize('target', ['rank', 'mpiexec'])
def test_stop_signal_saves_the_last_update_and_resumes_bit_exact(
        tmp_path, target):
    """SIGTERM to one rank, or SIGUSR1 to mpiexec: every rank finishes the
    update in progress, one snapshot of it is written, the job exits 4, and
    the resumed run ends where the uninterrupted one does, bit for bit."""
    args = TINY + ['--iterations', '8']
    out = str(tmp_path / 'stopped')
    proc = start_job(args, out, 3)
    if target == 'rank':
        os.kill(rank_pids(out, proc.pid)[1], signal.SIGTERM)
    else:
        os.kill(proc.pid, signal.SIGUSR1)
    start = time.time()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 4, stderr
    assert time.time() - start < 60
    lines = [line for line in stderr.splitlines() if 'stopped by' in line]
    assert len(lines) == 1 and 'Traceback' not in stderr, stderr
    name = 'SIGTERM' if target == 'rank' else 'SIGUSR1'
    stopped_at = int(lines[0].split('after iteration ')[1].split(';')[0])
    assert 3 <= stopped_at < 8
    snapshot = os.path.join(out, 'snapshot_iter_{}'.format(stopped_at))
    assert lines[0] == ('train_imagenet.py: stopped by {} after iteration '
                        '{}; its snapshot is {}; continue with --resume '
                        'auto'.format(name, stopped_at, snapshot))
    assert sorted(f for f in os.listdir(out) if 'snapshot' in f) == [
        'snapshot_iter_{}'.format(stopped_at)]  # no temporary file left
    assert snapshot_params(snapshot)
    assert not os.path.exists(os.path.join(out, 'model.npz'))  # unfinished

    resumed = run_mpi(2, args + ['--out', out, '--resume', 'auto'])
    assert 'resuming from {} at iteration {}'.format(
        snapshot, stopped_at) in resumed.stdout
    assert 'finished at iteration 8' in resumed.stdout
    assert os.path.exists(os.path.join(out, 'model.npz'))
    rows = [int(line.split()[1]) for line in resumed.stdout.splitlines()
            if line.startswith('0 ')]
    assert rows == list(range(stopped_at + 1, 9))  # the old rows are not
    if target == 'rank':
        ref = str(tmp_path / 'ref')
        run_mpi(2, args + ['--out', ref])
        final, expected = (snapshot_params(os.path.join(d, 'snapshot_iter_8'))
                           for d in (out, ref))
        assert final.keys() == expected.keys() and len(final) > 100
        for key in expected:
            assert (final[key] == expected[key]).all(), key


def test_ctrl_c_stops_a_run_without_a_launcher_with_a_snapshot(tmp_path):
    """Ctrl-C at a terminal (SIGINT) to a run started without mpiexec stops
    it as SIGTERM does: after the update in progress, with its snapshot."""
    out = str(tmp_path / 'run')
    proc = start_job(TINY + ['--iterations', '100'], out, 3, processes=None)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 4, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    match = re.match(r'train_imagenet\.py: stopped by SIGINT after iteration '
                     r'(\d+); its snapshot is (\S+); continue with --resume '
                     r'auto$', lines[0])
    assert match, lines[0]
    assert match.group(2) == os.path.join(
        out, 'snapshot_iter_{}'.format(match.group(1)))
    assert snapshot_params(match.group(2))


def test_output_of_another_run_is_never_overwritten(tmp_path):
    out = tmp_path / 'run'
    out.mkdir()
    (out / 'args.json').write_text('[]')
    (out / 'log').write_text('[]')
    (out / 'snapshot_iter_7').write_bytes(b'an earlier run')
    msg = one_line_error(TINY + ['--iterations', '1', '--out', str(out)])
    assert msg.endswith('--out {} holds another run (snapshot_iter_7, log); '
                        'continue it with --resume auto, or choose another '
                        '--out'.format(out))
    assert (out / 'log').read_text() == '[]'
    assert (out / 'snapshot_iter_7').read_bytes() == b'an earlier run'


@pytest.mark.parametrize('resume', [[], ['--resume', 'auto']])
def test_a_folder_of_a_users_files_is_refused_and_left_as_it_is(tmp_path,
                                                                resume):
    """``--out .`` in a home folder: its ``log``, ``args`` and hidden files
    named like the trainer's temporary ones are the user's."""
    names = ['notes.txt', 'log', 'args', 'loss.png', '.bashrc.tmp1234']
    for name in names:
        (tmp_path / name).write_text('mine: ' + name)
        os.utime(str(tmp_path / name), ns=(10 ** 18, 10 ** 18))
    msg = one_line_error(TINY + ['--iterations', '1', '--out',
                                 str(tmp_path)] + resume)
    assert msg == ('train_imagenet.py: error: --out {} holds files this '
                   'trainer did not write (args, log, loss.png, ...); choose '
                   'a new or empty --out'.format(tmp_path))
    assert sorted(os.listdir(str(tmp_path))) == sorted(names)
    for name in names:
        assert (tmp_path / name).read_text() == 'mine: ' + name
        assert os.stat(str(tmp_path / name)).st_mtime_ns == 10 ** 18


def test_a_file_at_out_tensorboard_is_refused_at_the_start(tmp_path):
    out = tmp_path / 'run'
    out.mkdir()
    (out / 'args.json').write_text('[]')
    (out / 'tensorboard').write_text('mine')
    msg = one_line_error(TINY + ['--iterations', '1', '--resume', 'auto',
                                 '--tensorboard', '--out', str(out)])
    assert msg == ('train_imagenet.py: error: --out {} is not a folder; the '
                   'trainer writes its tensorboard files in it: move it away'
                   .format(out / 'tensorboard'))
    assert (out / 'tensorboard').read_text() == 'mine'
    assert sorted(os.listdir(str(out))) == ['.lock', 'args.json',
                                            'tensorboard']


def test_a_running_jobs_output_is_locked(tmp_path):
    out = tmp_path / 'run'
    out.mkdir()
    with open(str(out / '.lock'), 'w') as held:  # as a running job holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write('process 12345 on node7 since 2026-12-04 10:00:00\n')
        held.flush()
        msg = one_line_error(TINY + ['--iterations', '1', '--resume', 'auto',
                                     '--out', str(out)])
    assert msg.endswith(
        '--out {} is in use by a running job (process 12345 on node7 since '
        '2026-12-04 10:00:00); wait for it to end or choose another --out'
        .format(out))
    assert sorted(os.listdir(str(out))) == ['.lock']


@pytest.fixture
def small_disk(tmp_path):
    """A 12 MiB tmpfs: two snapshots of the 0.125-wide ResNet-50 fit."""
    mount = tmp_path / 'disk'
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(
            ['mount', '-t', 'tmpfs', '-o', 'size=12m', 'tmpfs', str(mount)],
            capture_output=True).returncode != 0:
        pytest.skip('mounting a tmpfs needs root')
    yield mount
    subprocess.run(['umount', str(mount)], check=True)


def test_a_full_disk_ends_in_one_line_and_keeps_the_snapshots(small_disk):
    out = str(small_disk / 'run')
    proc = run_mpi(2, TINY + ['--iterations', '4', '--snapshot-iterations',
                              '1', '--keep-snapshots', '5', '--out', out],
                   check=False)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if 'error' in line]
    assert len(errors) == 1 and 'Traceback' not in proc.stderr, proc.stderr
    assert re.search(r'error: worker 0: {}/snapshot_iter_3: no space left on '
                     r'its file system \([0-9.]+ MiB free\); the snapshots '
                     r'written before it are intact$'.format(out), errors[0])
    assert not [f for f in os.listdir(out) if '.tmp' in f]
    for name in ('snapshot_iter_1', 'snapshot_iter_2'):
        assert resume.Snapshot.read(os.path.join(out, name)) is not None

    # A full disk is found before training starts.
    filler = small_disk / 'filler'
    with open(str(filler), 'wb', buffering=0) as f:
        try:
            while True:
                f.write(b'\0' * 65536)
        except OSError:
            pass
    msg = one_line_error(TINY + ['--out', str(small_disk / 'new')])
    assert msg.endswith('--out {}: no space left on its file system (0 bytes '
                        'free)'.format(small_disk / 'new'))


def test_a_short_run_logs_snapshots_and_closes_with_a_summary(tmp_path):
    out = str(tmp_path / 'short')
    proc = run_mpi(2, TINY + ['--iterations', '2', '--log-interval', '10',
                              '--out', out])
    assert [e['iteration'] for e in read_log(out)] == [2]
    assert sorted(f for f in os.listdir(out) if 'snapshot' in f) == [
        'snapshot_iter_2']
    assert '\033' not in proc.stdout  # output to a file: no escapes
    last = proc.stdout.strip().splitlines()[-1]
    # a run that ends before its first scheduled validation validates the
    # weights it saves
    assert re.match(r'finished at iteration 2 \(epoch 0\.01\); validation '
                    r'top-1 [0-9.]+%, top-5 [0-9.]+%, loss [0-9.e+-]+ \(the '
                    r'final weights\); \d+m\d\ds; model.npz, log and 1 '
                    r'snapshot\(s\) in {} \(newest snapshot_iter_2\)$'.format(
                        re.escape(out)), last), last

    again = run_mpi(2, TINY + ['--iterations', '2', '--out', out,
                               '--resume', 'auto'])
    lines = again.stdout.strip().splitlines()
    assert 'resuming from {} at iteration 2 (epoch 0.01)'.format(
        os.path.join(out, 'snapshot_iter_2')) in lines
    assert lines[-1].startswith('finished at iteration 2 ')
    assert not [line for line in lines if line.startswith('0 ')]  # no rows


def test_a_terminal_shows_a_progress_bar_with_a_finite_rate(tmp_path):
    """mpiexec whose output is a terminal: rank 0 draws Chainer's progress
    bar, every update, with a finite rate, and the closing line."""
    out = str(tmp_path / 'watched')
    terminal, launcher_side = pty.openpty()
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=REPO)
    proc = subprocess.Popen(
        mpi_command(2, TINY + ['--iterations', '6', '--out', out]), cwd=REPO,
        env=env, stdin=subprocess.DEVNULL, stdout=launcher_side,
        stderr=launcher_side)
    os.close(launcher_side)
    shown = b''
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # EIO: the launcher closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(terminal)
    assert proc.wait(timeout=120) == 0
    text = shown.decode()
    rates = re.findall(r'([0-9.a-z]+) iters/sec', text)
    assert rates and all(math.isfinite(float(r)) for r in rates), text
    assert '6 iter, 0 epoch / 6 iterations' in text
    assert '\033[J' in text
    assert 'finished at iteration 6 ' in text


def test_a_long_session_path_leaves_no_temporary_folder(tmp_path):
    """Where Open MPI's session folder is too long for a forkserver socket,
    each rank's temporary files go to a folder of its own in TMPDIR: the
    next job removes those of a job that was killed, and a job that ends
    removes its own."""
    train = folder_with_a_bad_image(tmp_path / 'train')
    sessions = tmp_path / ('s' * 60)  # Open MPI's session folders below it
    sessions.mkdir()
    tmp = pathlib.Path(tempfile.mkdtemp(dir='/tmp'))
    env = {'TMPDIR': str(tmp), 'PRTE_MCA_prte_tmpdir_base': str(sessions)}
    args = ['train_imagenet.py', train, train, '--batchsize', '4',
            '--crop-size', '32', '--loaderjob', '1', '--iterations', '4']
    killed = run_mpi(2, args + ['--out', str(tmp_path / 'killed')],
                     check=False, timeout=120, env=env)
    assert killed.returncode != 0
    assert 'cannot be decoded' in killed.stderr
    assert 'Traceback' not in killed.stderr

    run_mpi(2, args + ['--skip-bad-images', '--out', str(tmp_path / 'ok')],
            timeout=120, env=env)
    deadline = time.time() + 10  # the loaders' helpers end just after
    while os.listdir(str(tmp)) and time.time() < deadline:
        time.sleep(0.1)
    assert os.listdir(str(tmp)) == []
    tmp.rmdir()


def rank_of(pid):
    with open('/proc/{}/environ'.format(pid), 'rb') as f:
        variables = dict(entry.split(b'=', 1) for entry in
                         f.read().split(b'\0') if b'=' in entry)
    return int(variables[b'OMPI_COMM_WORLD_RANK'])


@pytest.mark.parametrize('stopped', [1, 0])
def test_a_stopped_rank_ends_the_job_within_the_stall_timeout(tmp_path,
                                                              stopped):
    out = str(tmp_path / 'out')
    proc = start_job(TINY + ['--iterations', '100000', '--stall-timeout',
                             '8'], out, 3, stdout=subprocess.DEVNULL)
    pid = [p for p in rank_pids(out, proc.pid) if rank_of(p) == stopped][0]
    os.kill(pid, signal.SIGSTOP)
    start = time.time()
    try:
        _, stderr = proc.communicate(timeout=8 + 60)
    finally:
        try:  # the abort has ended it, unless the test failed
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.kill()
    assert time.time() - start < 8 + 30
    assert proc.returncode == errors.STALLED_STATUS, stderr[-2000:]
    assert re.search(r'error: no progress within --stall-timeout 8 s: rank '
                     r'{} on \S+ sent nothing for \d+ s; ending the job '
                     r'\(exit 5\)'.format(stopped), stderr), stderr[-2000:]


def run_blocked(command, blocked, stop=None, timeout=90):
    """Run ``command`` (train_blocked.py's), which blocks in a read and then
    creates ``blocked``; send it ``stop`` then, if given. The seconds from
    the block to its end, its exit status and its stderr."""
    proc = subprocess.Popen(
        command, cwd=REPO,
        env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=REPO),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not os.path.exists(blocked):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.time() < deadline, 'never blocked'
            time.sleep(0.2)
        if stop:
            proc.send_signal(stop)
        start = time.time()
        _, stderr = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    return time.time() - start, proc.returncode, stderr


@pytest.mark.parametrize('phase,where', [
    ('update', 'update 2'),
    ('validation', r'the extensions after update 2 \(validation, '
     r'snapshots, reports\)')])
def test_a_rank_blocked_in_a_read_ends_the_job(tmp_path, phase, where):
    """Rank 1 blocked in the kernel (open() of a FIFO, as on a hung mount)
    while it loads the images of an update or a validation batch: the job
    ends within the stall timeout plus 30 s, naming rank 1 alone (rank 0,
    which waits for it in a collective, is ahead of it)."""
    blocked = str(tmp_path / 'blocked')
    seconds, status, stderr = run_blocked(mpi_command(2, [
        'tests/mpi_scripts/train_blocked.py', '1', phase, blocked] + TINY[1:]
        + ['--iterations', '2', '--stall-timeout', '8', '--out',
           str(tmp_path / 'out')]), blocked)
    assert seconds < 8 + 30
    assert status == errors.STALLED_STATUS, stderr[-2000:]
    assert re.search(r'error: no progress within --stall-timeout 8 s: rank 1 '
                     r'on \S+ has made no progress for \d+ s in {}; ending '
                     r'the job \(exit 5\)$'.format(where), stderr,
                     re.MULTILINE), stderr[-2000:]


def test_one_stop_signal_ends_a_one_process_run_blocked_in_a_read(tmp_path):
    """SIGTERM to a one-process run blocked in validation's read: it cannot
    stop after an update, so 30 s later it ends with its line (the stall
    timeout, 600 s, is far off)."""
    blocked = str(tmp_path / 'blocked')
    seconds, status, stderr = run_blocked([
        sys.executable, 'tests/mpi_scripts/train_blocked.py', '0',
        'validation', blocked] + TINY[1:] + [
            '--iterations', '2', '--out', str(tmp_path / 'out')], blocked,
        stop=signal.SIGTERM)
    assert seconds < 30 + 15
    assert status == errors.STALLED_STATUS, stderr[-2000:]
    assert re.search(r'error: no progress within 30 s of a stop signal: rank '
                     r'0 on \S+ received a stop signal and has made no '
                     r'progress for 3\d s since, in the extensions after '
                     r'update 2 ', stderr), stderr[-2000:]


@pytest.mark.parametrize('stopped', [1, 0])
def test_a_rank_stopped_while_the_job_starts_ends_it(tmp_path, stopped):
    """The watch starts with the communicator: a rank frozen while the
    datasets are read (the others wait for it in a broadcast) ends the job
    as one frozen in training does."""
    start = time.time()
    proc = run_mpi(2, ['tests/mpi_scripts/train_stopped_at_start.py',
                       str(stopped), 'datasets'] + TINY[1:] + [
                           '--iterations', '2', '--stall-timeout', '8',
                           '--out', str(tmp_path / 'out')],
                   timeout=8 + 90, check=False)
    assert time.time() - start < 8 + 60
    assert proc.returncode == errors.STALLED_STATUS, proc.stderr[-2000:]
    assert re.search(r'error: no progress within --stall-timeout 8 s: rank '
                     r'{} on \S+ sent nothing for \d+ s; ending the job '
                     r'\(exit 5\)'.format(stopped), proc.stderr), \
        proc.stderr[-2000:]


@pytest.mark.parametrize('stage', ['mpi', 'communicator'])
@pytest.mark.parametrize('stopped', [1, 0])
def test_a_rank_stopped_before_the_watch_ends_the_job(tmp_path, stopped,
                                                      stage):
    """Before the watch, MPI's start-up and the communicators' creation have
    a deadline on each worker's own clock: rank 0 ends the job with its line
    when rank 1 is stopped there, rank 1 twenty seconds later when rank 0
    is."""
    start = time.time()
    proc = run_mpi(2, ['tests/mpi_scripts/train_stopped_at_start.py',
                       str(stopped), stage] + TINY[1:] + [
                           '--iterations', '2', '--stall-timeout', '8',
                           '--out', str(tmp_path / 'out')],
                   timeout=8 + 90, check=False)
    assert time.time() - start < 8 + 20 + 40
    assert proc.returncode == errors.STALLED_STATUS, proc.stderr[-2000:]
    ranks = re.findall(r"error: no progress within --stall-timeout 8 s: the "
                       r"job's start \(MPI, the communicator\) has not ended "
                       r"on rank (\d) on \S+; a worker is stopped there or "
                       r"its node is gone; ending the job \(exit 5\)",
                       proc.stderr)
    assert ranks == [str(1 - stopped)], proc.stderr[-2000:]
    assert not os.path.exists(str(tmp_path / 'out' / 'log'))


def children(pid):
    """The processes whose parent is ``pid``."""
    found = subprocess.run(['pgrep', '-P', str(pid)], capture_output=True,
                           text=True).stdout.split()
    return [int(p) for p in found]


def test_a_killed_loader_ends_the_job_with_one_line(tmp_path):
    """The out-of-memory killer's SIGKILL to rank 1's loaders (its
    forkserver's children) ends the job within seconds, with one line."""
    out = str(tmp_path / 'out')
    proc = start_job(TINY[:4] + ['--loaderjob', '2'] + TINY[6:] + [
        '--iterations', '100000'], out, 3, stdout=subprocess.DEVNULL)
    try:
        rank = [p for p in rank_pids(out, proc.pid) if rank_of(p) == 1][0]
        loaders = [child for server in children(rank)
                   for child in children(server)]
        assert loaders, 'no loader process found'
        for pid in loaders:
            os.kill(pid, signal.SIGKILL)
        start = time.time()
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert time.time() - start < 30
    assert proc.returncode == 1, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if 'error:' in line]
    assert lines == [
        'train_imagenet.py: error: worker 1: a loader process ended abruptly '
        '(killed, as the out-of-memory killer kills, or crashed); the images '
        'it was loading are lost; fewer --loaderjob processes need less '
        'memory (0 loads in the training process); continue with --resume '
        'auto'], stderr[-2000:]
    assert 'Traceback' not in stderr


def test_a_rank_out_of_memory_ends_the_job_with_one_line(tmp_path):
    """Rank 1 gets 256 MiB more address space once the communicator is
    up: its forward pass at 224 px fails to allocate (in NumPy or in
    oneDNN, whichever asks first past the cap) while rank 0 goes on into
    the all-reduce, where the abort ends it."""
    proc = run_mpi(2, ['tests/mpi_scripts/train_out_of_memory.py', '1',
                       str(256 * 2 ** 20), '--demo', '--crop-size', '224',
                       '--batchsize', '8', '--loaderjob', '0', '--out',
                       str(tmp_path / 'out')], timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if 'error:' in line]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert re.search(
        r'train_imagenet\.py: error: worker 1: (Unable to allocate .+|oneDNN '
        r'\w+ could not allocate its memory); halve '
        r'--batchsize and double --accumulate: the total minibatch stays the '
        r'same \(validation has its own, --val-batchsize\)$', lines[0])
    assert 'Traceback' not in proc.stderr


def test_plots_are_by_iteration_with_validation_where_it_ran(tmp_path):
    out = str(tmp_path / 'plots')
    run_mpi(2, TINY + ['--iterations', '12', '--log-interval', '2',
                       '--val-interval', '0.01', '--out', out])
    with numpy.load(os.path.join(out, 'snapshot_iter_12')) as snapshot:
        data = {key.rsplit('_plot_', 1)[1]: json.loads(str(snapshot[key]))
                for key in snapshot.files if '/_plot_' in key}
    assert set(data) >= {'loss.png', 'accuracy.png', 'lr.png'}
    assert [x for x, _ in data['loss.png']['main/loss']] == [
        2, 4, 6, 8, 10, 12]
    # validation every 0.01 epoch (every 3.75 updates of 8 images): where
    # it ran, and at the end
    assert [x for x, _ in data['accuracy.png'][
        'validation/main/accuracy']] == [4, 8, 12]
    assert [x for x, _ in data['lr.png']['lr']] == [2, 4, 6, 8, 10, 12]


def tensorboard_scalars(folder):
    """``{tag: [(step, value), ...]}`` of every event file in ``folder``
    (TFRecord framing: length, its CRC, the event, its CRC)."""
    import struct
    from tensorboardX.proto import event_pb2
    scalars = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), 'rb') as f:
            data = f.read()
        offset = 0
        while offset < len(data):
            length, = struct.unpack('<Q', data[offset:offset + 8])
            event = event_pb2.Event.FromString(
                data[offset + 12:offset + 12 + length])
            offset += 16 + length
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(
                    (event.step, value.simple_value))
    return scalars


def test_args_and_tensorboard_continue_across_a_resume(tmp_path):
    pytest.importorskip('tensorboardX')
    out = str(tmp_path / 'board')
    args = TINY + ['--log-interval', '1', '--tensorboard', '--out', out]
    run_mpi(2, args + ['--iterations', '2'])
    run_mpi(2, args + ['--iterations', '4', '--resume', 'auto'])
    with open(os.path.join(out, 'args.json')) as f:
        history = json.load(f)
    assert [entry['resumed_from'] for entry in history] == [
        None, os.path.join(out, 'snapshot_iter_2')]
    assert history[1]['flags']['iterations'] == 4
    assert history[0]['recipe']['name'] == 'akiba2017'
    with open(os.path.join(out, 'args')) as f:
        assert json.load(f)['tensorboard'] is True  # ChainerUI's file
    scalars = tensorboard_scalars(os.path.join(out, 'tensorboard'))
    assert [step for step, _ in scalars['main/loss']] == [1, 2, 3, 4]
    log = {e['iteration']: e['main/loss'] for e in read_log(out)}
    assert [value for _, value in scalars['main/loss']] == pytest.approx(
        [log[i] for i in (1, 2, 3, 4)], rel=1e-6)
    assert [step for step, _ in scalars['validation/main/accuracy']] == [
        2, 4]
