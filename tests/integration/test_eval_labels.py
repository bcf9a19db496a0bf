"""eval_imagenet.py checks a validation set's labels against the model as
the trainer checks them: one line, exit status 2, instead of 0.00%, an
IndexError, or labels shifted by a missing class folder."""
import os
import subprocess
import sys

import chainer
import pytest
from PIL import Image

from conftest import REPO
import models


@pytest.fixture(scope='module')
def model_files(tmp_path_factory):
    """A 3-class model.npz with class names, and one without (as a
    snapshot has none)."""
    folder = tmp_path_factory.mktemp('models')
    network = models.ResNet50(3, width=0.125)
    paths = {}
    for name, names in (('named', ['a', 'b', 'c']), ('unnamed', [])):
        paths[name] = str(folder / (name + '.npz'))
        chainer.serializers.save_npz(paths[name], models.saved_model.ModelFile(
            network, dict(arch='resnet50', width=0.125, n_class=3,
                          class_names=names, crop_size=32, resize=36)))
    return paths


def evaluate(model, val, *args):
    proc = subprocess.run([sys.executable, 'eval_imagenet.py', model, val] +
                          list(args),
                          cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=REPO))
    return proc


def error_line(model, val, *args):
    proc = evaluate(model, val, *args)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert 'Traceback' not in proc.stderr and len(lines) == 1, proc.stderr
    return lines[0]


def images(folder, names):
    for name in names:
        os.makedirs(os.path.dirname(str(folder / name)), exist_ok=True)
        Image.new('RGB', (40, 40), (9, 9, 9)).save(str(folder / name))


@pytest.mark.parametrize('label', ['-1', '3'])
def test_a_label_outside_the_models_classes(model_files, tmp_path, label):
    images(tmp_path, ['x.jpg', 'y.jpg'])
    listing = tmp_path / 'val.txt'
    listing.write_text('x.jpg 0\ny.jpg {}\n'.format(label))
    msg = error_line(model_files['named'], str(listing), '--root',
                     str(tmp_path))
    assert msg == ('eval_imagenet.py: error: {}: label {} of its image 2 is '
                   'not one of the model\'s 3 classes'.format(listing, label))


def test_class_folders_without_the_models_names(model_files, tmp_path):
    images(tmp_path, ['val/a/1.jpg', 'val/c/2.jpg'])  # b is missing
    msg = error_line(model_files['unnamed'], str(tmp_path / 'val'))
    assert '2 class folders, the model has 3 classes and no names' in msg
    # the model's names give the labels, a missing folder shifts none
    proc = evaluate(model_files['named'], str(tmp_path / 'val'))
    assert proc.returncode == 0, proc.stderr
    assert 'on 2 images' in proc.stdout


def test_class_folders_the_model_does_not_have(model_files, tmp_path):
    images(tmp_path, ['val/a/1.jpg', 'val/z/2.jpg'])
    msg = error_line(model_files['named'], str(tmp_path / 'val'))
    assert 'class folder z is not among the training classes' in msg
