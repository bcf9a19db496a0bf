"""train_imagenet.py on N workers writes the synced final-batch statistics.

Runs train_imagenet.py in this process with every sync recorded: each rank's
statistics before it and after it. Checks that each sync left the average of
what the ranks had, the same on every rank, and (rank 0) that the last
snapshot holds the statistics of the last sync and model.npz the snapshot's
weights with those statistics as test-mode mean and variance.
Usage: bn_train_imagenet.py OUT [train_imagenet arguments...]
Prints ``ok <check>`` for each check that passed on this rank.
"""
import glob
import os
import runpy
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainermn
import numpy

import extensions.final_batch_statistics as sync_module
from models import FinalBatchNormalization

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'train_imagenet.py')

chainermn.global_except_hook.add_hook()  # a failed check aborts every rank
out = sys.argv[1]
original_sync = sync_module.sync_final_batch_statistics
syncs = []


def statistics(model):
    return {path: numpy.stack([a.copy() for a in link.kept_statistics])
            for path, link in model.namedlinks()
            if isinstance(link, FinalBatchNormalization)}


def recording_sync(model, comm):
    before = comm.mpi_comm.allgather(statistics(model))
    synced = original_sync(model, comm)
    syncs.append((before, statistics(model), comm))
    return synced


sync_module.sync_final_batch_statistics = recording_sync
sys.argv = [SCRIPT, '--out', out] + sys.argv[2:]
runpy.run_path(SCRIPT, run_name='__main__')

assert syncs, 'the statistics were never synced'
for before, after, comm in syncs:
    assert len(after) == 53  # every BN of ResNet-50
    everyone = comm.mpi_comm.allgather(after)
    for path, stats in after.items():
        average = numpy.mean([b[path] for b in before], axis=0)
        numpy.testing.assert_allclose(stats, average, rtol=1e-5, atol=1e-6)
        assert all(numpy.array_equal(stats, e[path]) for e in everyone)
    assert not numpy.allclose(before[0]['/predictor/bn1'],
                              before[-1]['/predictor/bn1'])
print('ok synced')

if comm.rank == 0:
    last = max(glob.glob(os.path.join(out, 'snapshot_iter_*')),
               key=lambda path: int(path.rsplit('_', 1)[1]))
    _, after, _ = syncs[-1]
    with numpy.load(last) as snapshot:
        for path, stats in after.items():
            saved = numpy.stack([
                snapshot['updater/model:main{}/{}'.format(path, name)]
                for name in ('batch_mean', 'batch_var', 'batch_mean_sq')])
            numpy.testing.assert_array_equal(saved, stats)
    print('ok snapshot')
    # The trained model: the snapshot's weights, the synced statistics in
    # test-mode form (union variance), under Chainer's BN names.
    with numpy.load(last) as snapshot, \
            numpy.load(os.path.join(out, 'model.npz')) as model:
        prefix = 'updater/model:main/predictor/'
        weights = [key[len(prefix):] for key in snapshot.files
                   if key.startswith(prefix) and 'batch_' not in key]
        assert len(weights) == 161 and set(weights) < set(model.files)
        for key in weights:
            numpy.testing.assert_array_equal(model[key],
                                             snapshot[prefix + key])
        for path, (mean, var, mean_sq) in after.items():
            key = path[len('/predictor/'):]
            numpy.testing.assert_array_equal(model[key + '/avg_mean'], mean)
            numpy.testing.assert_array_equal(model[key + '/avg_var'],
                                             var + mean_sq - mean ** 2)
    print('ok model')
