"""--accumulate K: K micro-batches per process behave like K processes."""
import json
import os

import numpy

COMMON = ['train_imagenet.py', '--demo', '--batchsize', '4', '--loaderjob',
          '0', '--iterations', '3', '--snapshot-iterations', '3',
          '--log-interval', '1', '--allreduce-dtype', 'float32']


def model_state(out):
    with numpy.load(os.path.join(out, 'snapshot_iter_3')) as snapshot:
        return {k: snapshot[k] for k in snapshot.files
                if k.startswith('updater/model:main/')}


def test_one_process_accumulating_two_equals_two_processes(mpirun, tmp_path):
    virtual, real = str(tmp_path / 'virtual'), str(tmp_path / 'real')
    mpirun(1, COMMON + ['--accumulate', '2', '--out', virtual])
    mpirun(2, COMMON + ['--out', real])
    a, b = model_state(virtual), model_state(real)
    assert a.keys() == b.keys()
    # Parameters and the synced final-batch BN statistics alike.
    assert any(k.endswith('/batch_mean') for k in a)
    for key in a:
        numpy.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-6,
                                      err_msg=key)
    with open(os.path.join(virtual, 'log')) as f:
        log_v = json.load(f)
    with open(os.path.join(real, 'log')) as f:
        log_r = json.load(f)
    # The schedule sees the total minibatch (8) in both runs.
    assert [e['lr'] for e in log_v] == [e['lr'] for e in log_r]
    assert [e['epoch'] for e in log_v] == [e['epoch'] for e in log_r]
