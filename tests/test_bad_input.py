"""Bad input ends the run with one line naming what was wrong."""
import os
import subprocess
import sys

import pytest
from PIL import Image

from conftest import REPO


def train(*args):
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, 'train_imagenet.py')] +
        list(args) + ['--loaderjob', '0'],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert 'Traceback' not in proc.stderr
    assert len(lines) == 1, proc.stderr
    return lines[-1]


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
    assert 'train.txt:2' in msg and 'expected "<image path> <integer label>"' in msg


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
    assert 'val.txt' in msg and 'label 10' in msg and 'out of range [0, 10)' in msg


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
    assert '{} must be positive, got 0'.format(flag) in msg


def test_unknown_communicator():
    msg = train('--demo', '--communicator', 'carrier_pigeon')
    assert '--communicator carrier_pigeon' in msg


def test_every_worker_stops_on_bad_input_and_reports_once(mpirun, images):
    bad = listing(images, 'train.txt', '0.jpg x\n')
    proc = mpirun(2, ['train_imagenet.py', bad, bad, '--root', str(images)],
                  check=False, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.count('label \'x\' is not an integer') == 1
