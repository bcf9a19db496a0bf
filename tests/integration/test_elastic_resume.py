"""Elastic resume: a run of 4 workers stopped at update 6 continues on 2
workers x 2 micro-batches and on 1 x 4 as if nothing happened: the same
images in the same BN batches, so the weights and the kept BN statistics
after the resumed update equal the uninterrupted run's, to 1e-4 of each
array's largest element (only the order of the float32 sum of the virtual
workers' gradients differs: about 1e-7 of it; in the RMSprop warm-up's
first updates, g / sqrt(m) with m near 0 magnifies that in the updates
that follow); another total is refused in one line."""
import os
import shutil

import numpy
import pytest

from conftest import run_mpi

TINY = ['train_imagenet.py', '--demo', '--batchsize', '4', '--loaderjob',
        '0', '--log-interval', '1', '--val_batchsize', '100', '--width',
        '0.125', '--val-interval', '100', '--allreduce-dtype', 'float32']
MODEL = 'updater/model:main/'


def model_arrays(path):
    with numpy.load(path) as snapshot:
        return {key: snapshot[key] for key in snapshot.files
                if key.startswith(MODEL)}


@pytest.fixture(scope='module')
def stopped(tmp_path_factory):
    root = tmp_path_factory.mktemp('elastic')
    straight = str(root / 'straight')
    run_mpi(4, TINY + ['--iterations', '7', '--snapshot-iterations', '1',
                       '--keep-snapshots', '10', '--out', straight],
            timeout=600)
    first = str(root / 'first')
    run_mpi(4, TINY + ['--iterations', '6', '--out', first], timeout=600)
    return root, straight, first


@pytest.mark.parametrize('workers, accumulate', [(2, '2'), (1, 'auto')])
def test_a_resume_on_another_split_continues_the_run(stopped, workers,
                                                     accumulate):
    root, straight, first = stopped
    out = str(root / 'on{}x{}'.format(workers, accumulate))
    shutil.copytree(first, out)
    proc = run_mpi(workers, TINY + [
        '--iterations', '7', '--accumulate', accumulate, '--resume', 'auto',
        '--out', out], timeout=600)
    if accumulate == 'auto':
        assert '--accumulate auto: 4 micro-batches per worker keep the ' \
            'total of {}'.format(os.path.join(out, 'snapshot_iter_6')) in \
            proc.stdout
    expected = model_arrays(os.path.join(straight, 'snapshot_iter_7'))
    resumed = model_arrays(os.path.join(out, 'snapshot_iter_7'))
    assert resumed.keys() == expected.keys() and len(expected) > 300
    for key, array in resumed.items():
        scale = numpy.abs(expected[key]).max() or 1
        assert numpy.abs(array - expected[key]).max() <= 1e-4 * scale, key


def test_another_total_is_refused_in_one_line(stopped):
    root, _, first = stopped
    proc = run_mpi(2, TINY + ['--iterations', '12', '--resume', 'auto',
                              '--out', first], check=False)
    assert proc.returncode == 2
    assert proc.stderr.count(
        'the snapshot was taken with a total minibatch of 4 workers x 1 '
        'micro-batches x 4 images = 16, this run has 2 workers x 1 '
        'micro-batches x 4 images = 8') == 1, proc.stderr
    proc = run_mpi(2, TINY + ['--iterations', '12', '--resume', 'auto',
                              '--accumulate', 'auto', '--batchsize', '8',
                              '--out', first], check=False)
    assert proc.returncode == 2
    assert proc.stderr.count('2 workers x 2 micro-batches x 8 images = '
                             '32') == 1, proc.stderr
