"""--dtype mixed16 on 2 CPU workers: accuracy, exact resume, loss scaling."""
import json
import os
import re
import subprocess
import sys

import numpy

from conftest import REPO
from conftest import run_mpi

SCRIPT = 'train_imagenet.py'
SMALL = ['--demo', '--loaderjob', '0', '--width', '0.25']


def read_log(out):
    with open(os.path.join(out, 'log')) as f:
        return json.load(f)


def test_mixed16_demo_accuracy_matches_float32(tmp_path):
    accuracy = {}
    for dtype in ('float32', 'mixed16'):
        out = str(tmp_path / dtype)
        run_mpi(2, [SCRIPT] + SMALL + ['--epoch', '1', '--dtype', dtype,
                                       '--out', out], timeout=300)
        log = read_log(out)
        accuracy[dtype] = log[-1]['validation/main/accuracy']
    assert 'loss_scale' in log[-1] and 'overflows' in log[-1]
    assert accuracy['mixed16'] > 0.35, accuracy  # chance: 0.1
    assert abs(accuracy['mixed16'] - accuracy['float32']) < 0.08, accuracy


def test_mixed16_resume_is_bit_identical(tmp_path):
    # A scale that overflows at once and an interval of 2: the snapshot
    # falls between a halving and the doublings that follow it.
    args = [SCRIPT] + SMALL + [
        '--batchsize', '4', '--dtype', 'mixed16', '--loss-scale', '65536',
        '--loss-scale-interval', '2', '--log-interval', '1',
        '--snapshot-iterations', '3']
    ref, cut = str(tmp_path / 'ref'), str(tmp_path / 'cut')
    run_mpi(2, args + ['--iterations', '6', '--out', ref])
    run_mpi(2, args + ['--iterations', '6', '--out', cut, '--resume',
                       os.path.join(ref, 'snapshot_iter_3')])
    scales = [e['loss_scale'] for e in read_log(ref)]
    assert scales[0] == 65536 and min(scales) < 65536
    assert read_log(ref)[-1]['overflows'] >= 1
    with numpy.load(os.path.join(ref, 'snapshot_iter_6')) as a, \
            numpy.load(os.path.join(cut, 'snapshot_iter_6')) as b:
        keys = [k for k in a.files if k.startswith('updater/')]
        assert any(k.endswith('/fp32_param') for k in keys)
        assert 'updater/loss_scale/clean_steps' in keys
        assert sorted(keys) == sorted(k for k in b.files
                                      if k.startswith('updater/'))
        for key in keys:
            numpy.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_eval_of_a_mixed16_model_prints_the_closing_lines_figures(tmp_path):
    out = str(tmp_path / 'out')
    proc = run_mpi(2, [SCRIPT, '--demo', '--loaderjob', '0', '--width',
                       '0.125', '--batchsize', '4', '--val_batchsize', '100',
                       '--iterations', '6', '--dtype', 'mixed16', '--out',
                       out])
    closing = [line for line in proc.stdout.splitlines()
               if line.startswith('finished at')][-1]
    evaluated = subprocess.run(
        [sys.executable, 'eval_imagenet.py', os.path.join(out, 'model.npz'),
         os.path.join(REPO, 'image_data', 'demo', 'val')], cwd=REPO,
        capture_output=True, text=True, timeout=300, check=True).stdout
    figures = r'validation top-1 [0-9.]+%, top-5 [0-9.]+%, loss [0-9.e+-]+'
    assert re.search(figures, evaluated).group(0) == \
        re.search(figures, closing).group(0)
