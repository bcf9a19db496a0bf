"""train_imagenet.py on one GPU: the demo's accuracy, and snapshots that
move between the GPU and the CPU."""
import json
import os

import numpy
import pytest

from conftest import run_mpi
import gpu_marks

pytestmark = gpu_marks.GPU

# CuPy 14 has no cuDNN: the trainer refuses to run without it unless told
DEVICE_FLAGS = {'gpu': ['--gpu', '--allow-no-cudnn'], 'cpu': []}
SHORT = ['--test', '--batchsize', '4', '--val_batchsize', '16',
         '--loaderjob', '0', '--width', '0.25']


def train(out, device, flags, timeout=300):
    """Run the trainer on 1 process; return its stdout and its log."""
    proc = run_mpi(1, ['train_imagenet.py', '--demo', '--out', str(out)]
                   + DEVICE_FLAGS[device] + flags, timeout=timeout,
                   env=gpu_marks.child_env())
    with open(os.path.join(str(out), 'log')) as f:
        return proc.stdout, json.load(f)


def test_demo_accuracy_is_in_the_cpu_demo_band(tmp_path):
    # The CPU demo (`make demo`: 2 workers x 32, 3 epochs) reaches 55-70%;
    # 2 micro-batches of 32 give one GPU the same updates and BN batches.
    _, log = train(tmp_path, 'gpu', ['--batchsize', '32', '--accumulate',
                                     '2'])
    accuracy = [entry['validation/main/accuracy'] for entry in log
                if 'validation/main/accuracy' in entry]
    print('GPU demo validation accuracy per epoch:', accuracy)
    assert len(accuracy) == 3 and accuracy[-1] >= 0.50


def snapshot_arrays(path):
    with numpy.load(path) as archive:
        return {key: archive[key] for key in archive.files}


@pytest.mark.parametrize('first, second', [('gpu', 'cpu'), ('cpu', 'gpu')])
def test_snapshot_resumes_on_the_other_device(tmp_path, first, second):
    train(tmp_path, first, SHORT + ['--iterations', '2'])
    written = snapshot_arrays(str(tmp_path / 'snapshot_iter_2'))
    stdout, log = train(tmp_path, second,
                        SHORT + ['--iterations', '4', '--resume', 'auto'])
    assert 'resuming from' in stdout and 'snapshot_iter_2' in stdout
    assert [entry['iteration'] for entry in log] == [1, 2, 3, 4]
    resumed = snapshot_arrays(str(tmp_path / 'snapshot_iter_4'))
    assert set(resumed) == set(written)
    for key, array in resumed.items():
        if array.dtype.kind == 'f':
            assert numpy.isfinite(array).all(), key
