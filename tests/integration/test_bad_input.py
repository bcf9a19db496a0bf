"""Bad input ends the run with one line naming what was wrong."""
import os
import socket
import subprocess
import sys
import time

import pytest
from PIL import Image

from conftest import REPO
from conftest import run_mpi


def run_script(*args, script=os.path.join(REPO, 'train_imagenet.py')):
    """``train_imagenet.py args...`` (or another ``script`` that runs it) in
    one process: its one error line."""
    proc = subprocess.run(
        [sys.executable, script] + list(args), capture_output=True,
        text=True, timeout=60, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert 'Traceback' not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith('train_imagenet.py: error: '), lines[0]
    return lines[0]


def train(*args):
    """As :func:`run_script`, loading images in the process."""
    return run_script(*(args + ('--loaderjob', '0')))


@pytest.fixture
def images(tmp_path):
    for i in range(4):
        Image.new('RGB', (40, 40)).save(str(tmp_path / '{}.jpg'.format(i)))
    return tmp_path


def listing(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_list_line_without_label(images):
    bad = listing(images, 'train.txt', '0.jpg 1\n1.jpg\n')
    msg = train(bad, bad, '--root', str(images))
    assert 'train.txt:2' in msg
    assert 'expected "<image path> <integer label>"' in msg


def test_image_that_does_not_exist(images):
    bad = listing(images, 'train.txt', '0.jpg 1\nmissing.jpg 0\n')
    msg = train(bad, bad, '--root', str(images))
    assert 'train.txt:2' in msg and 'missing.jpg does not exist' in msg


def test_dataset_path_that_does_not_exist(tmp_path):
    msg = train(str(tmp_path / 'nope.txt'), str(tmp_path / 'nope.txt'))
    assert 'nope.txt: no such file' in msg


def test_label_out_of_range(images):
    good = listing(images, 'train.txt', '0.jpg 1\n1.jpg 2\n')
    bad = listing(images, 'val.txt', '2.jpg 1\n3.jpg 10\n')
    msg = train(good, bad, '--root', str(images), '--n-class', '10')
    assert 'val.txt' in msg and 'label 10' in msg
    assert 'out of range [0, 10)' in msg


def test_empty_dataset(images):
    empty = listing(images, 'train.txt', '\n')
    msg = train(empty, empty, '--root', str(images))
    assert 'train.txt: no images listed' in msg


def test_empty_class_folders(tmp_path):
    os.makedirs(str(tmp_path / 'train' / 'a'))
    msg = train(str(tmp_path / 'train'), str(tmp_path / 'train'))
    assert 'no images found' in msg


@pytest.mark.parametrize('flag', ['--batchsize', '--val_batchsize', '--epoch'])
def test_non_positive_sizes(flag):
    msg = train('--demo', flag, '0')
    assert '{} must be positive, got 0'.format(flag.replace('_', '-')) in msg


@pytest.mark.parametrize('flags, expected', [
    (['--seed', '-5'], '--seed must be in [0, 2**32), got -5'),
    (['--seed', '4294967296'], '--seed must be in [0, 2**32), got 4294967296'),
    (['--loaderjob', '-1'], '--loaderjob must be non-negative, got -1'),
    (['--momentum', '1.5'], '--momentum must be in [0, 1), got 1.5'),
    (['--recipe', 'sgd', '--mu2', '0.9'],
     '--mu2 must be unset unless the optimizer is rmsprop-warmup, got 0.9'),
    (['--width', '0'], '--width must be positive, got 0'),
    (['--crop-size', '16'], '--crop-size must be at least 32'),
])
def test_flags_out_of_range(flags, expected):
    assert expected in run_script('--demo', *flags)


def test_nccl_communicator_on_cpu():
    msg = train('--demo', '--communicator', 'pure_nccl')
    assert '--communicator pure_nccl' in msg and 'needs GPUs' in msg


def test_unknown_communicator():
    msg = train('--demo', '--communicator', 'carrier_pigeon')
    assert '--communicator carrier_pigeon' in msg


def test_every_worker_stops_on_bad_input_and_reports_once(mpirun, images):
    bad = listing(images, 'train.txt', '0.jpg x\n')
    proc = mpirun(2, ['train_imagenet.py', bad, bad, '--root', str(images)],
                  check=False, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.count('label \'x\' is not an integer') == 1


@pytest.mark.parametrize('flags, expected', [
    (['--iterations', '0'], '--iterations must be positive, got 0'),
    (['--n-class', '0'], '--n-class must be positive, got 0'),
    (['--snapshot-interval', '0'], '--snapshot-interval must be positive'),
    (['--val-interval', '0'], '--val-interval must be positive, got 0'),
    (['--val-interval', '-1'], '--val-interval must be positive, got -1'),
    (['--snapshot-iterations', '-1'],
     '--snapshot-iterations must be non-negative (0: off), got -1'),
    (['--stall-timeout', '-3'],
     '--stall-timeout must be non-negative (0: never), got -3.0'),
    (['--device', 'foo'], '--device must be @cupy:N, @numpy or -1 (CPU), '
     'got foo'),
    (['--lr', 'inf'], '--lr must be finite, got inf'),
    (['--val-interval', 'nan'], '--val-interval must be finite, got nan'),
    (['--resize', '20'], '--crop-size must be at most --resize (20), got 32'),
    (['--crop-size', '40', '--resize', '36'],
     '--crop-size must be at most --resize (36), got 40'),
    (['--decoder', 'turbo'], '--decoder must be auto or pillow, got turbo'),
])
def test_flags_checked_before_training(flags, expected, tmp_path):
    assert expected in train('--demo', '--out', str(tmp_path), *flags)
    assert os.listdir(str(tmp_path)) == []  # nothing written


def test_an_out_that_is_a_file_is_refused_and_kept(tmp_path):
    path = tmp_path / 'notes.txt'
    path.write_text('kept')
    assert train('--demo', '--out', str(path)).endswith(
        '--out {}: it is a file, not a directory'.format(path))
    assert path.read_text() == 'kept'


def test_a_mean_file_that_is_no_array_is_named(tmp_path):
    mean = tmp_path / 'mean.npy'
    mean.write_text('')
    out = tmp_path / 'out'
    assert train('--demo', '--out', str(out), '--mean', str(mean)).endswith(
        '--mean {}: not a .npy array (empty)'.format(mean))
    assert os.listdir(str(out)) == ['.lock']  # free for the next job


def test_list_file_that_is_not_utf8(images):
    path = images / 'train.txt'
    path.write_bytes(b'0.jpg 1\n\xff\xfe.jpg 0\n')
    msg = train(str(path), str(path), '--root', str(images))
    assert 'train.txt:2: not UTF-8 text' in msg


def test_a_single_process_leaves_nothing_behind(tmp_path):
    """Without a launcher: no Open MPI shared-memory file, no
    multiprocessing folder, no help box, at a normal end and at an error."""
    shm, tmp = tmp_path / 'shm', tmp_path / 'tmp'
    shm.mkdir()
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=REPO, TMPDIR=str(tmp),
               OMPI_MCA_btl_sm_backing_directory=str(shm))
    for flags, status in (([], 0), (['--mean', 'missing.npy'], 2)):
        proc = subprocess.run(
            [sys.executable, 'train_imagenet.py', '--demo', '--iterations',
             '1', '--width', '0.125', '--batchsize', '4', '--loaderjob', '1',
             '--out', str(tmp_path / 'out{}'.format(status))] + flags,
            capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
        assert proc.returncode == status, proc.stderr
        assert 'Sorry' not in proc.stderr and 'leaked' not in proc.stderr
        assert os.listdir(str(shm)) == []
        assert not [f for f in os.listdir(str(tmp)) if f.startswith('pymp')]


# train_imagenet.py with cuda_stack.check standing in for a GPU machine's:
# cuDNN is off unless allowed, and then no GPU is visible; with
# FAILING_RANK=N the stack fails on rank N only (a node with a broken
# driver) and passes on the others
_GPU_STACK_RUNNER = '''
import os
import sys
from largebatch import cuda_stack
import train_imagenet

def check(allow_no_cudnn=False, need_nccl=True, intra_rank=0,
          requested=None):
    from mpi4py import MPI  # started by then
    failing = os.environ.get('FAILING_RANK')
    if failing and int(failing) != MPI.COMM_WORLD.rank:
        return
    if not allow_no_cudnn:
        raise cuda_stack.CudnnOffError('cuDNN is off (CuPy 14.2.0 has none)')
    raise cuda_stack.InputError('no GPU is visible (none here)')

cuda_stack.check = check
sys.argv[0] = 'train_imagenet.py'
train_imagenet.main(sys.argv[1:])
'''


def run_with_gpu_stack(tmp_path, *args):
    runner = tmp_path / 'runner.py'
    runner.write_text(_GPU_STACK_RUNNER)
    out = tmp_path / 'out'
    line = run_script('--demo', '--out', str(out), *args, script=str(runner))
    assert not out.exists()  # nothing written
    return line


def test_a_gpu_without_cudnn_names_the_flag_that_allows_it(tmp_path):
    assert run_with_gpu_stack(tmp_path, '--gpu') == (
        'train_imagenet.py: error: --gpu: cuDNN is off (CuPy 14.2.0 has '
        'none), or pass --allow-no-cudnn to train without it')
    assert run_with_gpu_stack(tmp_path, '--gpu', '--allow-no-cudnn') == (
        'train_imagenet.py: error: --gpu: no GPU is visible (none here)')
    assert run_with_gpu_stack(tmp_path, '--device', '@cupy:0') == (
        'train_imagenet.py: error: --device: cuDNN is off (CuPy 14.2.0 has '
        'none), or pass --allow-no-cudnn to train without it')


def test_a_gpu_stack_failing_on_one_worker_ends_the_job_at_once(tmp_path):
    """Rank 1's stack fails, rank 0's passes: both end together, with rank
    1's line, long before the start's deadline (the default 600 s)."""
    runner = tmp_path / 'runner.py'
    runner.write_text(_GPU_STACK_RUNNER)
    out = tmp_path / 'out'
    start = time.monotonic()
    proc = run_mpi(2, [str(runner), '--demo', '--gpu', '--allow-no-cudnn',
                       '--out', str(out)], check=False, timeout=300,
                   env={'FAILING_RANK': '1'})
    assert time.monotonic() - start < 120
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if 'error:' in line]
    assert errors == [
        'train_imagenet.py: error: --gpu: worker 1 on {}, GPU 1 '
        '(CUDA_VISIBLE_DEVICES={}): no GPU is visible (none here)'.format(
            socket.gethostname(), os.environ.get('CUDA_VISIBLE_DEVICES',
                                                 'unset'))], proc.stderr
    assert not out.exists()
