"""Multi-process behaviour of the spine, with real `mpiexec` jobs on CPU."""
import json
import os

import numpy
import pytest


def test_mean_gradient_equals_single_process_gradient_of_union(mpirun):
    mpirun(2, ['tests/mpi_scripts/spine_mean_grad.py', '2'])


@pytest.mark.parametrize('n_workers,n_images', [(2, 7), (3, 10), (2, 1)])
def test_validation_counts_every_image_once(mpirun, n_workers, n_images):
    mpirun(n_workers, ['tests/mpi_scripts/spine_validation_count.py',
                       str(n_images)])


def test_two_process_run_writes_log_plots_and_snapshot(mpirun, tmp_path):
    out = str(tmp_path / 'out')
    proc = mpirun(2, ['train_imagenet.py', '--demo', '--test', '--iterations',
                      '3', '--loaderjob', '1', '--val_batchsize', '16',
                      '--width', '0.25', '--out', out])
    assert 'total minibatch: 64' in proc.stdout
    with open(os.path.join(out, 'log')) as f:
        log = json.load(f)
    assert [e['iteration'] for e in log] == [1, 2, 3]
    assert 'validation/main/accuracy' in log[-1]
    for name in ('loss.png', 'accuracy.png', 'snapshot_iter_3'):
        assert os.path.getsize(os.path.join(out, name)) > 0
    with numpy.load(os.path.join(out, 'snapshot_iter_3')) as snapshot:
        conv1 = snapshot['updater/model:main/predictor/conv1/W']
    assert conv1.shape == (16, 3, 7, 7)  # --width 0.25 of 64 channels
